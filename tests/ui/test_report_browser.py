"""The HTML report in a real browser: every step shown, stepping works, user markup stays text."""
import torch

import thunderlab
from tests.data.evil_model import Evil, Evil_inputs
from tests.inspect.test_html import EVIL


def _report(tmp_path, fn, *args, pipeline="dce,cse,claim,del"):
    j = thunderlab.jit(fn, pipeline=pipeline, verify=True)
    j(*args)
    rec = thunderlab.last_record(j)
    path = tmp_path / "report.html"
    rec.to_html(path)
    return rec, path


def test_report_renders_and_steps(page, tmp_path):
    rec, path = _report(tmp_path, Evil(), *Evil_inputs())
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    assert page.locator(".tl-step").count() == len(rec.steps)
    root = page.locator("[data-step]").first
    last = len(rec.steps) - 1
    assert root.get_attribute("data-step") == str(last)
    page.locator(".tl-step").nth(2).click()
    assert root.get_attribute("data-step") == "2"
    assert "ltorch.linear" in page.locator("pre.tl-program").first.inner_text()
    page.locator(".tl-prev").first.click()
    assert root.get_attribute("data-step") == "1"
    page.locator(".tl-next").first.click()
    assert root.get_attribute("data-step") == "2"
    page.locator("button[data-tab=Graph]").first.click()
    svg = page.locator("svg.tl-graph").first
    labels = svg.locator("text").all_text_contents()
    assert "ltorch.linear" in labels and "x" in labels
    page.locator("button[data-tab=Program]").first.click()
    assert page.errors == []


def test_user_markup_in_the_report_does_not_run(page, tmp_path):
    rec, path = _report(tmp_path, Evil(), *Evil_inputs())
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    page.locator(".tl-step").nth(1).click()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert EVIL in page.locator("pre.tl-program").first.inner_text()  # shown as text
    assert page.errors == []


def test_cse_diff_is_shown(page, tmp_path):
    def f(x, y):
        return (x * y).sin() + (x * y).cos()

    rec, path = _report(tmp_path, f, torch.randn(3), torch.randn(3))
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    page.locator(".tl-step").nth(2).click()  # cse
    page.locator("button[data-tab=Diff]").first.click()
    removed = page.locator(".tl-diff .tl-del")
    assert any("ltorch.mul" in removed.nth(i).inner_text() for i in range(removed.count()))
