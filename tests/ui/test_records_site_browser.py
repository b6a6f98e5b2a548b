"""`thunderlab report DIR` in a real browser: the index links to each record's page, which draws every step;
markup in a record's name or code stays text, and unreadable files are listed, not blank."""

import thunderlab
from tests.data.evil_model import Evil, Evil_inputs
from tests.inspect.test_html import EVIL
from thunderlab.inspect.site import write_site


def test_the_site_over_saved_records(page, tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    j = thunderlab.jit(Evil(), pipeline="dce,cse,claim,del")
    j(*Evil_inputs())
    rec = thunderlab.last_record(j)
    rec.name = "<img src=x onerror=\"window.__pwned=3\">"
    thunderlab.save(rec, folder / "evil.thunderlab.json")
    (folder / "cut.thunderlab.json").write_text((folder / "evil.thunderlab.json").read_text()[:500])
    site = write_site(folder)
    page.goto(site.index.as_uri())
    assert "ends early (truncated?)" in page.locator("td.error").first.inner_text()
    link = page.locator("a").first
    assert link.inner_text() == rec.name  # the markup as text
    link.click()
    page.wait_for_selector(".tl-step")
    assert page.locator(".tl-step").count() == len(rec.steps)
    page.locator(".tl-step").nth(1).click()
    assert EVIL in page.locator("pre.tl-program").first.inner_text()
    assert page.evaluate("window.__pwned") is None and page.locator("img").count() == 0
    assert page.errors == []
