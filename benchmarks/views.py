"""How fast the views answer, measured in headless Chromium (Debian's; Playwright drives it, no browser download).

  .venv/bin/python benchmarks/views.py [--rounds 7] [--record PATH] [--out benchmarks/results/views.json]

What is timed, each from the user's action until the browser has laid out the result (the page's
style and layout are forced before the clock stops):
  - diff: the Diff pane of two 5,000-call programs (a synthetic record: 10% of the calls replaced,
    every 7th handed to another executor), in the HTML report;
  - records: the sidebar's records list (its real RecordsBody and RecordsModel) listing 1,000 records,
    filtering them and turning a page;
  - step switch: clicking another step of a 12-layer GPT-2 training record (the report's Program,
    Diff and "What it did" panes), the record compiled here (or read from --record, a payload JSON);
  - graph: benchmarks/views_graph.measure_graph, when that module exists.
Each figure is the median (and min) over --rounds rounds. Targets: diff 0.1 s, records 0.1 s, step switch
0.2 s. The machine's load average is recorded with the figures: on a loaded machine they are upper bounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM = os.environ.get("THUNDERLAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TARGETS_MS = {"diff_5000": 100, "records_1000": 100, "step_switch_gpt2_12": 200}


def synthetic_payload(n: int = 5000) -> dict:
    """A record of two steps whose forward programs have ``n`` calls each, aligned by stable id."""
    def trace(step: int) -> dict:
        lines = ["# thunderlab · forward", "def forward(x, w):"]
        calls = []
        for i in range(n):
            cid = f"c{i}" if step and i % 10 == 0 else f"b{i}"
            ex = ("inductor" if i % 7 == 0 else "torch") if step else "torch"
            lines.append(f"    t{i} = ltorch.add(t{i - 1 if i else 0}, x)".ljust(64) + f"  # cpu f32[8, 64]  [{ex}]")
            calls.append({"id": cid, "line": len(lines), "op": "ltorch.add", "executor": ex, "region": None,
                          "origin": None, "source": {"file": "model.py", "line": 10 + i % 50, "code": "y = x + y",
                                                     "scope": None, "cell": None, "path": None}})
        lines.append(f"    return t{n - 1}")
        return {"program": "\n".join(lines) + "\n", "diff": None, "graph": {"nodes": [], "edges": []}, "changes": None,
                "stats": {"symbols": n, "regions": 0, "executors": {"torch": n}}, "calls": calls}

    def step(i, spec):
        return {"index": i, "spec": spec, "seconds": 0.01, "symbols_before": n, "symbols_after": n, "error": None,
                "verification": {"ok": True, "structural": "ok", "max_error": None, "detail": ""},
                "notes": {}, "traces": {"forward": trace(i)}}

    return {"schema": "thunderlab.record/v1", "name": "synthetic", "inputs": ["cpu f32[8, 64]"] * 2,
            "input_names": [{"name": "x", "type": "cpu f32[8, 64]"}, {"name": "w", "type": "cpu f32[8, 64]"}],
            "pipeline": "claim", "created": 0.0, "error": None, "compile_seconds": 0.02,
            "steps": [step(0, "capture"), step(1, "claim")], "regions": {}}


def gpt2_payload(path: str | None) -> dict:
    if path:
        return json.loads(Path(path).read_text())
    import torch

    import thunderlab
    from thunderlab.examples import gpt2_from_config
    from thunderlab.inspect.serialize import RecordPayload

    model = gpt2_from_config(n_layer=12).train()
    j = thunderlab.jit(model)
    x = torch.randint(0, 128, (2, 16))
    j(x).logits.sum().backward()
    rec = max(thunderlab.records(), key=lambda r: r.steps[0].symbols_after)
    return RecordPayload(rec).to_dict()


def report_file(payload: dict, folder: Path, name: str) -> Path:
    from thunderlab.inspect.html import payload_html

    p = folder / name
    p.write_text(payload_html(payload, name), encoding="utf-8")
    return p


def records_bundle(folder: Path) -> Path:
    """The sidebar's records list bundled on its own (extension/bench/records.ts) with the extension's esbuild."""
    out = folder / "records-bench.js"
    script = ("require('esbuild').build({entryPoints:['bench/records.ts'],bundle:true,format:'iife',platform:'browser',"
              f"loader:{{'.svg':'text'}},outfile:{json.dumps(str(out))},logLevel:'error'}}).catch(e=>{{console.error(e);process.exit(1)}})")
    subprocess.run(["node", "-e", script], cwd=ROOT / "extension", check=True)
    return out


# the click handlers render synchronously; reading offsetHeight makes the browser do style and layout too
CLICK_JS = """async (sel) => {
  const el = document.querySelector(sel);
  if (!el) throw new Error('no ' + sel);
  const t0 = performance.now();
  el.click();
  document.body.offsetHeight;
  return performance.now() - t0;
}"""


# a fixed workload (10,000 map entries and a 5,000-line split), timed with the figures: about 3 ms on an idle
# core of a 2020s laptop; a larger figure says how loaded the machine was
REFERENCE_JS = """() => {
  const t = performance.now(); const m = new Map();
  for (let i = 0; i < 10000; i++) m.set('b' + i, { text: 'x' + i });
  let s = 0; for (let i = 0; i < 10000; i++) s += m.get('b' + i).text.length;
  'a\\n'.repeat(5000).split('\\n').map((l) => l.trim());
  return performance.now() - t;
}"""


def time_click(page, before: list[str], click: str) -> float:
    for sel in before:
        page.evaluate("(s) => document.querySelector(s).click()", sel)
    return page.evaluate(CLICK_JS, click)


def stats(xs: list[float]) -> dict:
    return {"median_ms": round(statistics.median(xs), 2), "min_ms": round(min(xs), 2), "rounds": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--record", help="a 12-layer GPT-2 training record's payload JSON (else compiled here)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "views.json"))
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="tl-views-"))
    t = time.time()
    big = gpt2_payload(a.record)
    print(f"12-layer GPT-2 training record ready ({time.time() - t:.1f} s)", flush=True)
    diff_page = report_file(synthetic_payload(5000), tmp, "diff.html")
    gpt_page = report_file(big, tmp, "gpt2.html")
    bundle = records_bundle(tmp)
    (tmp / "records.html").write_text(f"<!DOCTYPE html><html><body><script src='{bundle.name}'></script></body></html>")
    results: dict = {"load_average_at_start": os.getloadavg()[0], "cpus": os.cpu_count()}
    last = len(big["steps"]) - 1
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        # diff of two 5,000-call programs: from the Program pane to the Diff pane, in the report
        # (a fresh page each round: the first draw aligns the calls; coming back to the pane reuses the alignment)
        xs, again = [], []
        for _ in range(a.rounds):
            page.goto(diff_page.as_uri())
            page.wait_for_selector(".tl-step")
            xs.append(time_click(page, ["button[data-tab='What it did']"], "button[data-tab='Diff']"))
            again.append(time_click(page, ["button[data-tab='What it did']"], "button[data-tab='Diff']"))
        assert page.locator(".tl-cd-summary").count() == 1, "the diff pane did not draw"
        results["diff_5000"] = {
            **stats(xs),
            "again": stats(again),
            "rows_drawn_first": page.locator(".tl-cd-table tr").count(),
            "summary": page.locator(".tl-cd-summary").inner_text(),
        }
        # records list with 1,000 records, the sidebar's own widget
        page.goto((tmp / "records.html").as_uri())
        runs = [page.evaluate("window.tlBench.records(1000)") for _ in range(a.rounds)]
        results["records_1000"] = {
            k: stats([r[k] for r in runs]) for k in ("list_ms", "filter_ms", "page_ms", "add_ms")
        }
        results["records_1000"]["rows_shown"] = runs[-1]["shown"]
        results["records_1000"].update(
            stats([max(r["list_ms"], r["filter_ms"], r["page_ms"], r["add_ms"]) for r in runs])
        )
        # a step switch on the 12-layer GPT-2 training record, in three panes
        page.goto(gpt_page.as_uri())
        page.wait_for_selector(".tl-step")
        switch: dict = {}
        for pane in ("Program", "Diff", "What it did"):
            page.evaluate("(p) => document.querySelector(`button[data-tab='${p}']`).click()", pane)
            xs = []
            for r in range(a.rounds):
                a_, b_ = (last - 1, last) if r % 2 else (last, last - 1)
                page.evaluate("(i) => document.querySelector(`tr.tl-step[data-index='${i}']`).click()", a_)
                xs.append(page.evaluate(CLICK_JS, f"tr.tl-step[data-index='{b_}']"))
            switch[pane] = stats(xs)
        worst = max(switch.values(), key=lambda s: s["median_ms"])
        results["step_switch_gpt2_12"] = {
            **worst,
            "by_pane": switch,
            "calls_in_forward": len(big["steps"][last]["traces"]["forward"].get("calls", [])),
            "program_lines": big["steps"][last]["traces"]["forward"]["program"].count("\n"),
        }
        results["reference_loop_ms"] = stats([page.evaluate(REFERENCE_JS) for _ in range(a.rounds)])
        browser.close()
    try:
        from benchmarks.views_graph import measure_graph
    except ImportError as e:
        results["graph_5000"] = {"skipped": f"benchmarks/views_graph.py not available: {e}"}
    else:
        results.update(measure_graph())
    results["targets_ms"] = TARGETS_MS
    results["load_average_at_end"] = os.getloadavg()[0]
    for k, target in TARGETS_MS.items():
        results[k]["meets_target"] = results[k]["median_ms"] <= target
        print(f"{k:24s} median {results[k]['median_ms']:8.1f} ms  (min {results[k]['min_ms']:.1f}, target {target} ms)")
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {a.out}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
