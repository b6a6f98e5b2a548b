"""The graph view in a real browser (the HTML report): zoom, search, selecting a node shows its details,
and a backward call's link leads to its forward call and back."""
import re

from playwright.sync_api import expect

import thunderlab
from thunderlab.examples import EXAMPLES
from thunderlab.inspect.serialize import RecordPayload


def test_graph_zoom_search_details_and_forward_backward_jump(page, tmp_path):
    model, inputs = EXAMPLES["mlp"]()
    j = thunderlab.jit(model)
    j(*inputs)
    rec = thunderlab.last_record(j)
    path = tmp_path / "report.html"
    rec.to_html(path)
    traces = RecordPayload(rec).traces(len(rec.steps) - 1)
    bw = next(n for n in traces["backward"]["graph"]["nodes"] if n["derived_from"] and n["outputs"])
    fw = next(n for n in traces["forward"]["graph"]["nodes"] if n["id"] == bw["derived_from"])

    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    page.locator("button[data-tab=Graph]").first.click()
    page.locator("button[data-tab=backward]").first.click()
    svg = page.locator("svg.tl-graph").first
    view = page.locator(".tl-graph-view").first
    # the legend names the executors with their colours
    assert view.locator(".tl-legend-executor").count() >= 1
    # zoom: the buttons and the wheel change the scale
    z0 = float(svg.get_attribute("data-zoom"))
    page.locator("button.tl-zoom-in").first.click()
    z1 = float(svg.get_attribute("data-zoom"))
    assert z1 > z0
    box = page.locator(".tl-graph-wrap").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 400)
    assert float(svg.get_attribute("data-zoom")) < z1
    page.locator("button.tl-fit").first.click()
    # search by op name: matches highlighted, Enter walks through them (centring each)
    search = page.locator("input.tl-graph-search").first
    search.fill(bw["label"])
    matches = svg.locator("g.tl-node.tl-match").count()
    assert matches >= 1
    assert re.match(r"\d+ found", page.locator(".tl-search-count").first.inner_text())
    for _ in range(matches):
        search.press("Enter")
        if view.get_attribute("data-selected") == bw["id"]:
            break
    assert view.get_attribute("data-selected") == bw["id"]
    assert float(svg.get_attribute("data-zoom")) >= 0.9, "a found node is shown at a readable zoom"
    # clicking a node selects it: its details show the op, typed inputs and outputs, executor, origin
    svg.locator(f'g.tl-node[data-id="{bw["id"]}"]').click()
    details = page.locator(".tl-graph-details").first
    assert details.locator(".tl-details-title").inner_text() == bw["label"]
    assert details.locator('tr[data-key="op"] td').nth(1).inner_text() == bw["label"]
    assert bw["outputs"][0][1] in details.locator('tr[data-key="output"]').first.inner_text()
    assert details.locator('tr[data-key="input"]').count() >= 1
    assert details.locator('tr[data-key="executor"] td').nth(1).inner_text() == bw["executor"]
    assert details.locator('tr[data-key="derived from"] td').nth(1).inner_text() == fw["id"]
    # backward -> forward: the forward trace opens with the forward call selected
    details.locator(f'button.tl-jump[data-id="{fw["id"]}"]').click()
    assert "tl-active" in page.locator("button[data-tab=forward]").first.get_attribute("class")
    # the focus is shown once the new view is laid out in the page (a later animation frame)
    expect(page.locator(".tl-graph-view").first).to_have_attribute("data-selected", fw["id"])
    assert page.locator(".tl-graph-details .tl-details-title").first.inner_text() == fw["label"]
    # and back: the forward call lists the backward calls derived from it
    page.locator(f'.tl-graph-details button.tl-jump[data-id="{bw["id"]}"]').click()
    assert "tl-active" in page.locator("button[data-tab=backward]").first.get_attribute("class")
    expect(page.locator(".tl-graph-view").first).to_have_attribute("data-selected", bw["id"])
    assert page.errors == []


def test_a_big_graph_draws_what_is_in_view_and_search_brings_the_rest(page, tmp_path):
    from thunderlab.inspect.html import payload_html

    n = 3000
    nodes = [{"id": f"b{i}", "label": "ltorch.add" if i < n - 1 else "ltorch.the_last_one", "kind": "call",
              "executor": "torch", "source": None, "group": None, "outputs": [[f"t{i}", "cpu f32[4]"]]}
             for i in range(n)]
    edges = [{"src": f"b{i - 1}", "dst": f"b{i}", "value": f"t{i - 1}", "type": "cpu f32[4]"} for i in range(1, n)]
    graph = {"nodes": nodes, "edges": edges}
    forward = {"program": "", "diff": None, "graph": graph, "changes": None,
               "stats": {"symbols": n, "regions": 0, "executors": {}}}
    step = {"index": 0, "spec": "capture", "seconds": 0.0, "symbols_before": 0, "symbols_after": n, "error": None,
            "verification": None, "notes": {}, "traces": {"forward": forward}}
    payload = {"schema": "thunderlab.record/v1", "name": "chain", "inputs": [], "pipeline": "", "created": 0.0,
               "error": None, "compile_seconds": 0.0, "steps": [step], "regions": {}}
    path = tmp_path / "big.html"
    path.write_text(payload_html(payload, "chain"), encoding="utf-8")
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(path.as_uri())
    page.wait_for_selector(".tl-step")
    page.locator("button[data-tab=Graph]").first.click()
    svg = page.locator("svg.tl-graph").first
    drawn = int(svg.get_attribute("data-drawn"))
    assert 0 < drawn < n, "only the part in view is in the page"
    assert svg.locator(f'g.tl-node[data-id="b{n - 1}"]').count() == 0
    search = page.locator("input.tl-graph-search").first
    search.fill("the_last_one")
    search.press("Enter")
    last = svg.locator(f'g.tl-node[data-id="b{n - 1}"]')
    assert last.count() == 1 and "tl-selected" in last.get_attribute("class")
    assert svg.locator('g.tl-node[data-id="b0"]').count() == 0, "the top of the chain left the page"
    page.locator("button.tl-fit").first.click()  # the whole chain: too small to read, text hidden
    assert float(svg.get_attribute("data-zoom")) < 0.45 and "tl-far" in svg.get_attribute("class")
    assert page.errors == []
