"""The static HTML report: one self-contained file (payload and view code inline) that opens offline.

Every text from user code reaches the page only as JSON data inside a
``<script type="application/json">`` element, with ``<``, ``>`` and ``&`` written as
``\\u003c``-style escapes so no sequence in it can end the element; the view code puts
it on the page with ``textContent`` only.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .serialize import RecordPayload

if TYPE_CHECKING:  # annotations only: a record imports this module to render itself
    from .record import CompileRecord

# the views' one bundle (extension/src/views.ts): a classic script defining ``thunderlabViews``; the
# notebook widget loads the same file as an ES module (thunderlab/jupyter/widget.py)
BUNDLE = Path(__file__).parent / "static" / "views.js"
_START = "<script>thunderlabViews.startReport()</script>"

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
</head>
<body>
<div id="thunderlab-root" class="thunderlab"></div>
<script type="application/json" id="thunderlab-payload">{payload}</script>
{bundle}
{start}
</body>
</html>
"""


_SURROGATE = re.compile("[\ud800-\udfff]")


def script_safe_json(data) -> str:
    """JSON text that can sit inside a <script> element: no '<', '>' or '&' appear literally.

    Lone surrogates (which Python strings may hold and UTF-8 cannot) are written as JSON escapes,
    so any Python string reaches the page as the same string.
    """
    text = json.dumps(data, allow_nan=False, ensure_ascii=False)
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _title(text: str) -> str:
    """A page title for any Python string: surrogates and control characters replaced, at most 200 characters."""
    text = _SURROGATE.sub("\ufffd", text)
    text = re.sub("[\x00-\x1f\x7f]", "\ufffd", text)
    return html.escape(text if len(text) <= 200 else text[:199] + "…")


def bundle_text() -> str:
    """The views' bundle as built: the report's script, and the notebook widget's module with one line more."""
    if not BUNDLE.exists():
        raise FileNotFoundError(f"the views' bundle {BUNDLE} is missing; build it with "
                                f"`cd extension && npm install && npm run build`")
    return BUNDLE.read_text(encoding="utf-8")


def bundle_js() -> str:
    """The bundle as it can sit inside a <script> element of the page."""
    return bundle_text().replace("</script", "<\\/script")


def payload_html(payload: dict, title: str, *, bundle_src: str | None = None) -> str:
    """The page for one payload; the view code inline, or from the file ``bundle_src`` beside the page (a site)."""
    script = (f'<script src="{html.escape(bundle_src)}"></script>' if bundle_src is not None
              else f"<script>{bundle_js()}</script>")
    return _PAGE.format(title=_title(title), payload=script_safe_json(payload), bundle=script, start=_START)


def to_html(record: CompileRecord, path: str | Path | None = None) -> str:
    """The report's HTML text for ``record``; written to ``path`` when given."""
    text = payload_html(RecordPayload(record).to_dict(), f"thunderlab · {record.name} · {record.pipeline}")
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
