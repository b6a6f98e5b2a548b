"""The graph view in headless Chromium: a 5,000-node graph laid out and drawn (target: under 1 s), and
a 12-layer GPT-2 training record's backward graph with every group expanded.

  PYTHONPATH=$PWD .venv/bin/python benchmarks/views_graph.py [--rounds 5] [--no-gpt2]

writes benchmarks/results/views_graph.json. ``measure_graph(page)`` is the measurement itself, for
benchmarks/views.py to call with its own Playwright page (or with ``browser_args``, a dict of
Playwright ``launch`` keyword arguments, to start its own Chromium).

What is timed: wall-clock seconds and the CPU seconds of Chromium's processes (user + system, from
/proc; a fairer figure on a shared machine, as it does not grow while other work waits for a CPU),
from the click on the Graph tab to the second animation frame after it, so the
layout (graph/layout.ts), building the SVG, style, layout and paint by the browser are all in the
figure. ``drawn`` counts the nodes and edges put in the page: above 500 shown nodes the view keeps only
those near the viewport in the DOM (every node is laid out and painted on the minimap; panning and
zooming bring the rest in), so for the 5,000-node graph it is the part in view. Each round loads the page
afresh; the median and the minimum are recorded. The machine may be shared; the figures are wall-clock times
of one Chromium renderer.

Choice of layout (measured with node 20 on trace-shaped DAGs: a chain with skip connections and
inputs, 1.7 edges per node; the machine was loaded, load average about 10 on 2 cores, so the times are
inflated, but not by the orders of magnitude that separate them):

  1,000 nodes   @dagrejs/dagre 3.1.3 (network simplex)      163 s
                elkjs 0.12.1 layered, NETWORK_SIMPLEX layers  82 s
                elkjs 0.12.1 layered, LONGEST_PATH layers     62 s
                d3-dag 1.2.2 sugiyama (longest path, two-layer decross, greedy coord)  > 300 s (stopped)
  5,000 nodes   dagre: stack overflow; the others not attempted

All three minimise crossings and route long edges through dummy nodes, and a trace's long skip
edges make thousands of them. thunderlab's views therefore use their own linear-time compound layered
layout (extension/src/graph/layout.ts); its figures are the ones this script records. It runs on the
main thread: at its cost (node 20, same loaded machine: 1,000 nodes 0.12 s, 5,000 nodes 0.8 s, 10,000
nodes 1.0 s, first calls included) a web worker would add a copy of the graph and a message round trip
for little gain.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

CHROMIUM = os.environ.get("THUNDERLAB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
RESULTS = Path(__file__).parent / "results" / "views_graph.json"


def synthetic_graph(n: int = 5000, seed: int = 0) -> dict:
    """A trace-shaped graph of ``n`` nodes: inputs, a chain of calls with skip connections, one output."""
    rnd = random.Random(seed)
    inputs = max(4, n // 40)
    nodes, edges = [], []
    ops = ["ltorch.linear", "ltorch.add", "ltorch.mul", "prims.transpose", "ltorch.softmax", "ltorch.native_layer_norm"]
    for i in range(n - 1):
        if i < inputs:
            nodes.append({"id": f"in:x{i}", "label": f"x{i}", "kind": "input", "executor": None, "source": None,
                          "group": None, "outputs": [[f"x{i}", "cpu f32[8, 64]"]]})
            continue
        nodes.append({"id": f"b{i}", "label": rnd.choice(ops), "kind": "call",
                      "executor": rnd.choice(["torch", "inductor"]), "source": f"model.py:{i}", "group": None,
                      "outputs": [[f"t{i}", "cpu f32[8, 64]"]]})
    ids = [nd["id"] for nd in nodes]
    for i in range(inputs, n - 1):
        edges.append({"src": ids[i - 1], "dst": ids[i], "value": f"t{i - 1}", "type": "cpu f32[8, 64]"})
        if rnd.random() < 0.6:
            j = max(0, i - 2 - int(rnd.random() * 30))
            edges.append({"src": ids[j], "dst": ids[i], "value": f"t{j}", "type": "cpu f32[8, 64]"})
        if rnd.random() < 0.15:
            j = rnd.randrange(inputs)
            edges.append({"src": ids[j], "dst": ids[i], "value": f"x{j}", "type": "cpu f32[8, 64]"})
    nodes.append({"id": "out", "label": "return", "kind": "output", "executor": None, "source": None, "group": None})
    edges.append({"src": ids[-1], "dst": "out", "value": "t", "type": "cpu f32[8, 64]"})
    return {"nodes": nodes, "edges": edges}


def graph_payload(graph: dict, name: str = "synthetic") -> dict:
    """A one-step record payload holding ``graph`` as its forward trace."""
    calls = sum(1 for nd in graph["nodes"] if nd["kind"] == "call")
    step = {"index": 0, "spec": "capture", "seconds": 0.0, "symbols_before": 0, "symbols_after": calls, "error": None,
            "verification": None, "notes": {},
            "traces": {"forward": {"program": "# (not shown)\n", "diff": None, "graph": graph, "changes": None,
                                   "stats": {"symbols": calls, "regions": 0, "executors": {}}}}}
    return {"schema": "thunderlab.record/v1", "name": name, "inputs": [], "pipeline": "", "created": 0.0, "error": None,
            "compile_seconds": 0.0, "steps": [step], "regions": {}}


_TIME_GRAPH = """async ([expand]) => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const t0 = performance.now();
  document.querySelector('button[data-tab="Graph"]').click();
  if (expand) document.querySelector('button.tl-expand-all').click();
  await frame(); await frame();
  const t1 = performance.now();
  return {ms: t1 - t0, nodes: document.querySelectorAll('svg.tl-graph g.tl-node').length,
          edges: document.querySelectorAll('svg.tl-graph path.tl-edge').length};
}"""


def _chromium_cpu_s() -> float:
    """CPU seconds (user + system) used so far by the Chromium processes this process started (through
    Playwright's driver): unlike wall-clock time, this does not grow when other work shares the CPUs."""
    kids: dict[int, list[int]] = {}
    stat: dict[int, list[str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stat[int(d)] = parts
        kids.setdefault(int(parts[1]), []).append(int(d))
    total, todo = 0, list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo.extend(kids.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"chrom" not in f.read():
                    continue
        except OSError:
            continue
        total += int(stat[pid][11]) + int(stat[pid][12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def _time_page(page, html_path: Path, rounds: int, expand: bool = False, trace: str | None = None) -> dict:
    times, cpu, shown = [], [], None
    local = Path("/proc").is_dir()
    for _ in range(rounds):
        page.goto(html_path.as_uri())
        page.wait_for_selector(".tl-step")
        if trace:
            page.locator(f'button[data-tab="{trace}"]').first.click()
        c0 = _chromium_cpu_s() if local else 0.0
        r = page.evaluate(_TIME_GRAPH, [expand])
        if local:
            cpu.append(_chromium_cpu_s() - c0)
        times.append(r["ms"] / 1000)
        shown = {"nodes": r["nodes"], "edges": r["edges"]}
    out = {"median_s": statistics.median(times), "min_s": min(times), "rounds": rounds, "drawn": shown}
    if cpu and any(cpu):
        out["cpu_median_s"] = statistics.median(cpu)
        out["cpu_min_s"] = min(cpu)
    return out


def measure_graph(page_or_browser_args=None, *, rounds: int = 5, gpt2: bool = False) -> dict:
    """The graph view's figures: ``{"graph_5000": {...}, "gpt2_12_backward": {...}?}``, seconds.

    ``page_or_browser_args``: a Playwright page to use, or a dict of ``chromium.launch`` keyword
    arguments (None: Debian's chromium, headless, with this file's flags)."""
    from thunderlab.inspect.html import payload_html

    tmp = Path(tempfile.mkdtemp(prefix="views-graph-"))
    synth = tmp / "graph5000.html"
    synth.write_text(payload_html(graph_payload(synthetic_graph(5000)), "5,000-node graph"), encoding="utf-8")
    pages = [(synth, "graph_5000", False, None)]
    if gpt2:
        path = tmp / "gpt2_12.html"
        nodes = _gpt2_report(path, 12)
        pages.append((path, "gpt2_12_backward", True, "backward"))

    def run(page) -> dict:
        out = {}
        for path, key, expand, trace in pages:
            out[key] = _time_page(page, path, rounds, expand, trace)
            out[key]["target_s"] = 1.0
        if gpt2:
            out["gpt2_12_backward"]["graph_nodes"] = nodes
        return out

    if page_or_browser_args is not None and hasattr(page_or_browser_args, "goto"):
        return run(page_or_browser_args)
    from playwright.sync_api import sync_playwright

    launch = page_or_browser_args or {"executable_path": CHROMIUM, "args": ARGS, "headless": True}
    with sync_playwright() as p:
        b = p.chromium.launch(**launch)
        try:
            pg = b.new_page(viewport={"width": 1400, "height": 1000})
            return run(pg)
        finally:
            b.close()


def _gpt2_report(path: Path, layers: int) -> int:
    """Compiles a GPT-2 training step (``layers`` layers), writes its report; the backward graph's node count."""
    import torch

    import thunderlab
    from thunderlab.examples import gpt2_from_config
    from thunderlab.inspect.serialize import RecordPayload

    m = gpt2_from_config(n_layer=layers)
    m.train()

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, labels=x).loss

    j = thunderlab.jit(Loss())
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))
    j(ids)
    # a graph break may split the step: the record of the model (the biggest program), not of the loss's tail
    rec = max((r for r in thunderlab.records() if r.steps[-1].program is not None),
              key=lambda r: sum(len(t.bound_symbols) for t in r.steps[-1].program.traces.values()))
    rec.to_html(path)
    traces = RecordPayload(rec).traces(len(rec.steps) - 1)
    return len(traces["backward"]["graph"]["nodes"])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-gpt2", action="store_true", help="only the synthetic 5,000-node graph")
    a = ap.parse_args(argv)
    t = time.time()
    res = measure_graph(None, rounds=a.rounds, gpt2=not a.no_gpt2)
    res["meta"] = {"chromium": CHROMIUM, "flags": ARGS, "cpus": os.cpu_count(),
                   "load_avg": os.getloadavg()[0], "wall_s": round(time.time() - t, 1)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    json.dump(res, sys.stdout, indent=2)
    print()
    return res


if __name__ == "__main__":
    main()
