"""The static HTML report: self-contained, every user text escaped, the payload recoverable from the page."""
import html
import json
import re
from pathlib import Path

import torch

import thunderlab
from tests.data.evil_model import Evil, Evil_inputs
from thunderlab.inspect.html import script_safe_json

EVIL = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


def _evil_record():
    j = thunderlab.jit(Evil(), pipeline="dce,cse,claim,del", verify=True)
    j(*Evil_inputs())
    return thunderlab.last_record(j)


def _payload_from(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="thunderlab-payload">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_report_escapes_user_code(tmp_path):
    rec = _evil_record()
    page = rec.to_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == page
    assert EVIL in rec.steps[1].python()  # the markup is really in the program text
    assert "</script><script>window" not in page and "<img src=x" not in page
    assert page.count("</script>") == 3  # payload, bundle, the line starting it: none from user code
    payload = _payload_from(page)
    assert EVIL in payload["steps"][1]["traces"]["forward"]["program"]
    assert payload == json.loads(rec.to_json())


def test_report_is_self_contained(tmp_path):
    page = _evil_record().to_html()
    assert "<script src" not in page and "<link" not in page
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?https?:""", page)  # nothing fetched from a network
    assert "innerHTML" not in page


def test_script_safe_json_round_trips_awkward_text():
    data = {"s": "a</script>&<!-- \u2028\u2029 'q' \"d\"", "n": [1, 2.5, None]}
    text = script_safe_json(data)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == data


ODD = "<b>x</b>\ud800 lone \udfff surrogates \x00\x1b[31m control " + "n" * 5000


def _odd_record():
    def f(x):
        return x.sin() + 1

    f.__name__ = ODD  # any Python string can be a function's name
    j = thunderlab.jit(f)
    j(torch.randn(3))
    return thunderlab.last_record(j)


def test_any_python_string_survives_the_report_and_the_payload(tmp_path):
    rec = _odd_record()
    page = rec.to_html(tmp_path / "odd.html")  # writes UTF-8: no lone surrogate reaches the file raw
    assert (tmp_path / "odd.html").read_bytes().decode("utf-8") == page
    assert _payload_from(page)["name"] == ODD  # the same string comes back out of the page
    assert json.loads(rec.to_json(tmp_path / "odd.json"))["name"] == ODD
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    assert len(html.unescape(title)) <= 200 and "<b>" not in title and "\x00" not in title


def test_the_report_and_the_widget_load_one_committed_bundle():
    from thunderlab.inspect.html import BUNDLE, bundle_text
    from thunderlab.jupyter.widget import PassDebugger

    static = Path(thunderlab.__file__).parent
    assert sorted(p.relative_to(static).as_posix() for p in static.glob("*/static/*.js")) == ["inspect/static/views.js"]
    assert BUNDLE.name == "views.js"
    # the widget's ES module is the report's script and its default export, nothing else
    assert PassDebugger._esm == bundle_text() + "\nexport default thunderlabViews.widget;\n"
    assert "thunderlabViews.startReport()" in _evil_record().to_html()
