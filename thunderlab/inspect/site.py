"""One offline HTML site over a folder of record files (``thunderlab report DIR``).

``index.html`` lists every ``*.thunderlab.json`` file in the folder; each record that loads gets its own
page (the report's view, its code shared in ``views.js``), and each file that does not is listed with the
reason, so a damaged or foreign file never leaves a blank page. Every text from a file reaches the index
escaped, and the record pages only as JSON data (see ``html``).
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path

from .document import SUFFIX, RecordFileError, read_payload
from .html import bundle_js, payload_html

_INDEX = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>thunderlab records · {folder}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }}
th, td {{ text-align: left; padding: 0.25em 0.75em; border-bottom: 1px solid #ddd; vertical-align: top; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.error {{ color: #b00020; }}
code {{ font-size: 0.9em; }}
</style>
</head>
<body>
<h1>thunderlab records</h1>
<p>{summary}</p>
<table>
<thead><tr><th>#</th><th>record</th><th>pipeline</th><th>steps</th><th>compile ms</th><th>made</th><th>status</th>
<th>file</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
</body>
</html>
"""


@dataclass
class Site:
    """What ``write_site`` wrote: the index, one page per record, and the files it could not read (with why)."""

    index: Path
    pages: list[Path] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _first_line(text: str | None) -> str:
    return (text or "").splitlines()[0] if text else ""


def _when(created: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))
    except (OverflowError, OSError, ValueError):  # a time no clock shows: the file says so, the page goes on
        return html.escape(repr(created))


def write_site(folder, out=None) -> Site:
    """Write ``out`` (default ``folder/report``): ``index.html`` over every record file in ``folder``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {str(folder)!r}")
    out = Path(out) if out is not None else folder / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "views.js").write_text(bundle_js(), encoding="utf-8")
    files = sorted(folder.glob(f"*{SUFFIX}"))
    site = Site(out / "index.html")
    rows = []
    for i, path in enumerate(files):
        e = html.escape
        try:
            payload = read_payload(path)
        except RecordFileError as err:
            site.failed[path.name] = str(err)
            rows.append(f'<tr><td class="num">{i}</td><td colspan="6" class="error">{e(str(err))}</td>'
                        f"<td><code>{e(path.name)}</code></td></tr>")
            continue
        page = out / f"record-{i:04d}.html"
        page.write_text(payload_html(payload, f"thunderlab · {payload['name']} · {payload['pipeline']}",
                                     bundle_src="views.js"), encoding="utf-8")
        site.pages.append(page)
        status = (f'<span class="error">{e(_first_line(payload["error"]))}</span>' if payload["error"]
                  else "ok")
        made = _when(payload["created"])
        rows.append(f'<tr><td class="num">{i}</td><td><a href="{e(page.name)}">{e(payload["name"])}</a></td>'
                    f'<td><code>{e(payload["pipeline"])}</code></td><td class="num">{len(payload["steps"])}</td>'
                    f'<td class="num">{payload["compile_seconds"] * 1e3:.1f}</td><td>{made}</td><td>{status}</td>'
                    f"<td><code>{e(path.name)}</code></td></tr>")
    summary = (f"{len(site.pages)} records from <code>{html.escape(str(folder))}</code>"
               + (f", {len(site.failed)} files that are not readable records (listed with the reason)"
                  if site.failed else "")
               if files else f"no <code>*{SUFFIX}</code> files in <code>{html.escape(str(folder))}</code>")
    site.index.write_text(_INDEX.format(folder=html.escape(folder.name), summary=summary, rows="\n".join(rows)),
                          encoding="utf-8")
    return site
