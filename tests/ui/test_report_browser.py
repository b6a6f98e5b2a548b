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
    removed = page.locator(".tl-cd-removed")
    assert removed.count() == 1 and "ltorch.mul" in removed.first.inner_text()
    assert "1 removed" in page.locator(".tl-cd-summary").inner_text()


def test_graph_groups_by_module_and_marks_changes(page, tmp_path):
    from tests.inspect.test_graph_scopes import Net

    rec, path = _report(tmp_path, Net(), torch.randn(2, 8))
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    page.locator(".tl-step").nth(len(rec.steps) - 1).click()
    page.locator("button[data-tab=Graph]").first.click()
    # no fusion regions here: the graph opens grouped by module, at the depth of the two blocks
    assert page.locator("select.tl-group-by").first.input_value() == "modules"
    assert page.locator("select.tl-depth").first.input_value() == "2"
    groups = page.locator("svg.tl-graph g.tl-group")
    assert sorted(groups.nth(i).get_attribute("data-group") for i in range(groups.count())) == ["blocks.0", "blocks.1"]
    calls = page.locator("svg.tl-graph g.tl-node").count()
    page.locator('svg.tl-graph g.tl-group[data-group="blocks.0"]').first.click(position={"x": 3, "y": 3})
    folded = page.locator('svg.tl-graph g.tl-node[data-id="group:blocks.0"]')
    assert folded.count() == 1 and folded.locator("text").text_content().startswith("▸ blocks.0")
    assert page.locator("svg.tl-graph g.tl-node").count() < calls
    folded.first.click()
    assert page.locator("svg.tl-graph g.tl-node").count() == calls
    # one level deeper: each block's attn becomes a group of its own
    page.locator("select.tl-depth").first.select_option("3")
    names = page.locator("svg.tl-graph g.tl-group")
    assert "blocks.0.attn" in [names.nth(i).get_attribute("data-group") for i in range(names.count())]
    page.locator("button.tl-collapse-all").first.click()
    assert page.locator("svg.tl-graph g.tl-group").count() == 0
    assert page.locator('svg.tl-graph g.tl-node[data-id="group:blocks.1.attn"]').count() == 1
    page.locator("button.tl-expand-all").first.click()
    assert page.locator('svg.tl-graph g.tl-node[data-id^="group:"]').count() == 0
    # claim labels every call with its executor: each is marked changed, and the legend counts them
    claim = next(s.index for s in rec.steps if s.spec == "claim")
    page.locator(".tl-step").nth(claim).click()
    legend = page.locator(".tl-changes").first.inner_text()
    changed = len(rec.graph_diff(claim - 1, claim, expand_regions=True).changed)
    assert f"~{changed} changed" in legend and changed > 0
    assert page.locator("svg.tl-graph g.tl-mark-changed").count() == changed
    assert page.errors == []


def _mlp_report(tmp_path, pipeline="dce,cse,claim,del", verify=True):
    from thunderlab.examples import EXAMPLES

    model, inputs = EXAMPLES["mlp"]()
    j = thunderlab.jit(model, pipeline=pipeline, verify=verify)
    j(*inputs)
    rec = thunderlab.last_record(j)
    path = tmp_path / "report.html"
    rec.to_html(path)
    return rec, path


def test_inputs_by_name_verification_words_and_source_lines(page, tmp_path):
    rec, path = _mlp_report(tmp_path)
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    inputs = page.locator(".tl-inputs").first.inner_text()
    names = [i.name for i in rec.steps[0].program.forward.inputs]
    assert "x" in names
    assert inputs.startswith("inputs: x cpu f32[8, 64]")  # the user's input by name, with its shape
    assert "parameters and buffers" in inputs  # the model's weights folded under one line
    # verify=True compared numbers: the table says so, not a bare "ok"
    assert "numbers match eager" in page.locator(".tl-steps").first.inner_text()
    page.locator(".tl-step").nth(1).click()
    page.locator(".tl-program .tl-call-line").first.click()
    bar = page.locator(".tl-source-bar").first.inner_text()
    assert "examples.py:" in bar, bar  # the MLP's forward is in thunderlab/examples.py
    assert page.locator(".tl-line-selected").count() == 1
    page.locator("button[data-tab='What it did']").first.click()
    assert "step 1: dce" in page.locator(".tl-notes-view").first.inner_text()
    assert page.errors == []


def test_structure_only_is_said_when_numbers_were_not_compared(page, tmp_path):
    rec, path = _mlp_report(tmp_path, verify=False)
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    text = page.locator(".tl-steps").first.inner_text()
    assert "structure only" in text and "numbers match" not in text


def test_claim_diff_shows_executors_and_any_step_can_be_compared(page, tmp_path):
    rec, path = _mlp_report(tmp_path)
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    claim = next(s.index for s in rec.steps if s.spec.startswith("claim"))
    page.locator(".tl-step").nth(claim).click()
    page.locator("button[data-tab=Diff]").first.click()
    summary = page.locator(".tl-cd-summary").first.inner_text()
    assert "executor assignment" in summary and "no call changed" not in summary, summary
    assert "executor none → torch" in page.locator(".tl-cd-changed").first.inner_text()
    page.locator("select.tl-diff-against").first.select_option("0")  # against capture, not the previous step
    assert page.locator(".tl-cd-table th").first.inner_text() == "step 0: capture"


def test_the_widget_fits_a_sidebar(page, tmp_path):
    """The notebook widget's step table and pipeline box at a narrow sidebar's width: nothing runs past the edge."""
    from tests.ui.conftest import mount_widget
    from thunderlab.inspect.serialize import RecordPayload

    rec, _ = _mlp_report(tmp_path, pipeline="dce,cse,autodiff,claim{executors=inductor+torch},del")
    page.set_viewport_size({"width": 300, "height": 900})
    mount_widget(page, RecordPayload(rec).to_dict())
    for sel in (".tl-steps", ".tl-pipeline", ".tl-rerun", ".tl-tabs"):
        right = page.evaluate(f"document.querySelector('{sel}').getBoundingClientRect().right")
        assert right <= 300, f"{sel} ends at {right} px in a 300 px sidebar"
    assert page.evaluate("document.documentElement.scrollWidth") <= 300
    assert page.errors == []


def test_a_profiled_record_shows_its_kernels_per_region(page, tmp_path):
    from tests.executors.test_fusion import PIPE

    def f(x, w):
        return torch.tanh(torch.sin(x) @ w) * 2

    j = thunderlab.jit(f, pipeline=PIPE, tiered=False)
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    j(x, w)
    rec = thunderlab.last_record(j)
    path = tmp_path / "plain.html"
    rec.to_html(path)
    page.goto(path.as_uri())
    page.locator("button[data-tab=Timings]").first.click()
    assert "not profiled yet" in page.locator(".tl-kernels-none").inner_text()
    thunderlab.profile(j, x, w)
    rec.to_html(path)
    page.goto(path.as_uri())
    page.locator("button[data-tab=Timings]").first.click()
    regions = page.locator(".tl-kernels tbody").evaluate_all("els => els.map(e => e.dataset.region)")
    assert regions[-1] == "(outside regions)" and any(r.startswith("testfuse") for r in regions), regions
    sin = page.locator('.tl-kernel[data-kernel="aten::sin"] .tl-kernel-name')
    assert sin.inner_text() == "aten::sin" and sin.get_attribute("title") == "aten::sin"
    # on a CPU no kernel has device time: no device column
    assert page.locator(".tl-kernels thead").inner_text().split() == ["kernel", "calls", "CPU", "µs"]
    assert page.errors == []
