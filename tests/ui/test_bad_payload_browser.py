"""A payload that does not follow thunderlab.record/v1, in a real browser: the report and the notebook widget say in
the page which field is wrong and what was expected there, with no script error; markup in the payload stays text.

The malformed payloads are the shared cases of extension/test/fixtures (see tests/inspect/test_payload_fixtures.py).
"""
import json

import pytest

from tests.inspect.test_payload_fixtures import CASES, RECORD, broken
from tests.ui.conftest import mount_widget
from thunderlab.inspect.html import payload_html

TRACES_A_NUMBER = "steps[1].traces: expected null or an object (name → a trace), got the number 5"


def _case(why: str) -> dict:
    return next(c for c in CASES if c["why"] == why)


@pytest.fixture
def watched(page):
    """The page, with its console errors kept (page.errors has the uncaught exceptions)."""
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    return page


def _problems(page) -> list[str]:
    return page.locator(".tl-problems li").all_inner_texts()


def _clean(page):
    assert page.errors == [] and page.console_errors == [], (page.errors, page.console_errors)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.locator(".tl-steps").count() == 0  # nothing was drawn from the bad data


@pytest.mark.parametrize("case", CASES, ids=[c["why"] for c in CASES])
def test_the_report_names_the_wrong_field(watched, tmp_path, case):
    payload = broken(case, json.loads(RECORD.read_text()))
    path = tmp_path / "bad.html"
    path.write_text(payload_html(payload, "bad"), encoding="utf-8")
    watched.goto(path.as_uri())
    panel = watched.locator("#thunderlab-root .tl-problems")
    assert panel.get_attribute("role") == "alert"
    title = panel.locator(".tl-problems-title").inner_text()
    assert title.startswith("thunderlab cannot show this report") and "thunderlab.record/v1" in title
    paths = panel.locator(".tl-problem-path").all_inner_texts()
    assert (case["path"] or "the record") in paths, paths
    for line in _problems(watched):
        assert ": expected " in line and ", got " in line, line
    _clean(watched)


def test_the_report_says_exactly_what_is_wrong(watched, tmp_path):
    path = tmp_path / "bad.html"
    payload = broken(_case("traces a number"), json.loads(RECORD.read_text()))
    path.write_text(payload_html(payload, "bad"), encoding="utf-8")
    watched.goto(path.as_uri())
    assert _problems(watched) == [TRACES_A_NUMBER]
    assert '("block")' in watched.locator(".tl-problems-title").inner_text()  # the record's name, when it has one
    # another version: one line and what to do, not a list of its differences
    payload = broken(_case("another schema version"), json.loads(RECORD.read_text()))
    path.write_text(payload_html(payload, "bad"), encoding="utf-8")
    watched.goto(path.as_uri())
    assert _problems(watched) == ['schema: expected "thunderlab.record/v1" (the version this viewer reads), '
                                  'got the string "thunderlab.record/v9"']
    assert "another version of thunderlab" in watched.locator(".tl-problems-hint").inner_text()
    _clean(watched)


def test_markup_in_a_malformed_payload_is_shown_as_text(watched, tmp_path):
    evil = '<img src=x onerror="window.__pwned=2">'
    path = tmp_path / "bad.html"
    payload = broken(_case("a field with markup for a name"), json.loads(RECORD.read_text()))
    payload["name"] = evil
    payload["steps"][1]["traces"]["forward"]["graph"]["nodes"][0]["kind"] = "<script>window.__pwned=1</script>"
    path.write_text(payload_html(payload, "bad"), encoding="utf-8")
    watched.goto(path.as_uri())
    text = watched.locator(".tl-problems").inner_text()
    assert f"steps[0][{json.dumps(evil)}]" in text
    assert 'got the string "<script>window.__pwned=1</script>"' in text
    assert json.dumps(evil) in watched.locator(".tl-problems-title").inner_text()
    _clean(watched)


def test_a_report_cut_short_says_it_is_not_json(watched, tmp_path):
    page_text = payload_html(json.loads(RECORD.read_text()), "cut")
    start = page_text.index('id="thunderlab-payload">') + len('id="thunderlab-payload">')
    cut = page_text[:start + 500] + page_text[page_text.index("</script>", start):]
    path = tmp_path / "cut.html"
    path.write_text(cut, encoding="utf-8")
    watched.goto(path.as_uri())
    [line] = _problems(watched)
    assert line.startswith("the record: expected a thunderlab record as JSON text, got text that is not JSON"), line
    _clean(watched)


def test_a_good_payload_draws_no_panel(watched, tmp_path):
    path = tmp_path / "good.html"
    path.write_text(payload_html(json.loads(RECORD.read_text()), "good"), encoding="utf-8")
    watched.goto(path.as_uri())
    watched.wait_for_selector(".tl-step")
    assert watched.locator(".tl-problems").count() == 0
    assert watched.locator(".tl-step").count() == 4
    assert watched.errors == [] and watched.console_errors == []


def test_the_widget_names_the_wrong_field_then_draws_the_record_once_it_is_good(watched):
    good = json.loads(RECORD.read_text())
    mount_widget(watched, broken(_case("traces a number"), good))
    assert watched.locator(".tl-problems-title").inner_text().startswith("thunderlab cannot show this record")
    assert _problems(watched) == [TRACES_A_NUMBER]
    watched.evaluate("(p) => window.__tlSet('payload', p)", broken(_case("a step cut short"), good))
    missing = "steps[2].traces: expected null or an object (name → a trace), got nothing (the field is missing)"
    assert missing in _problems(watched)
    watched.evaluate("(p) => window.__tlSet('payload', p)", good)
    assert watched.locator(".tl-problems").count() == 0
    assert watched.locator(".thunderlab .tl-step").count() == 4
    assert watched.locator(".thunderlab").get_attribute("data-step") == "1"
    watched.evaluate("(p) => window.__tlSet('payload', p)", broken(_case("a trace null"), good))
    assert _problems(watched) == ["steps[1].traces.forward: expected a trace, got null"]
    assert watched.locator(".thunderlab[data-step]").count() == 0
    assert watched.errors == [] and watched.console_errors == []
