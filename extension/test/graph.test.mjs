// The graph view's pure logic: the compound layout, search, change marks and legend, forward/backward links.
import test from "node:test";
import assert from "node:assert/strict";
import {
  layoutCompound, searchNodes, nextMatch, changeMarks, changeLegend, changeSummary, crossLinks, nodeDetails,
  nodeWidth, typeLine, executorsIn, collapseGroups,
} from "../build-test/graph.mjs";

const N = (id, group = null) => ({ id, width: 100, height: 30, group });
const inside = (b, g) => b.x >= g.x && b.y >= g.y && b.x + b.width <= g.x + g.width && b.y + b.height <= g.y + g.height;
const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

test("compound layout: members inside their group's box, nothing else in it, no overlaps", () => {
  // two groups interleaved in input order, with an ungrouped node between them and a cross edge
  const nodes = [N("in"), N("a1", "A"), N("b1", "B"), N("a2", "A"), N("x"), N("b2", "B"), N("a3", "A"), N("out")];
  const edges = [["in", "a1"], ["a1", "a2"], ["a2", "a3"], ["in", "b1"], ["b1", "b2"], ["a2", "x"], ["x", "b2"], ["a3", "out"], ["b2", "out"]]
    .map(([src, dst]) => ({ src, dst }));
  const l = layoutCompound(nodes, edges);
  assert.equal(l.nodes.size, nodes.length);
  assert.deepEqual(l.groups.map((g) => g.name).sort(), ["A", "B"]);
  for (const g of l.groups) {
    for (const n of nodes) {
      const b = l.nodes.get(n.id);
      if (n.group === g.name) assert.ok(inside(b, g), `${n.id} outside ${g.name}`);
      else assert.ok(!overlap(b, g), `${n.id} drawn over group ${g.name}`);
    }
  }
  const [A, B] = l.groups;
  assert.ok(!overlap(A, B), "group boxes overlap");
  const ids = [...l.nodes.keys()];
  for (let i = 0; i < ids.length; i++) for (let j = i + 1; j < ids.length; j++)
    assert.ok(!overlap(l.nodes.get(ids[i]), l.nodes.get(ids[j])), `${ids[i]} overlaps ${ids[j]}`);
  for (const b of l.nodes.values()) assert.ok(b.x + b.width <= l.width && b.y + b.height <= l.height);
  // edges between ungrouped nodes and groups point downwards
  assert.ok(l.nodes.get("in").y < l.nodes.get("a1").y && l.nodes.get("a3").y < l.nodes.get("out").y);
});

test("compound layout: an input sits just above its first user, not in the top row", () => {
  const nodes = [N("in0"), N("late"), N("c1"), N("c2"), N("c3"), N("c4")];
  const edges = [["in0", "c1"], ["c1", "c2"], ["c2", "c3"], ["c3", "c4"], ["late", "c4"]].map(([src, dst]) => ({ src, dst }));
  const float = layoutCompound(nodes, edges, { floatSources: (id) => id === "late" });
  assert.ok(float.nodes.get("late").y > float.nodes.get("c2").y, "the input feeding c4 floats down to c4's layer - 1");
  assert.ok(float.nodes.get("late").y < float.nodes.get("c4").y);
  const top = layoutCompound(nodes, edges);
  assert.equal(top.nodes.get("late").y, top.nodes.get("in0").y, "without floatSources it stays in the top row");
});

test("compound layout copes with cycles between groups, dangling edges and empty graphs", () => {
  assert.equal(layoutCompound([], []).nodes.size, 0);
  const l = layoutCompound([N("a", "G"), N("b"), N("c", "G")], [{ src: "a", dst: "b" }, { src: "b", dst: "c" }, { src: "a", dst: "zz" }]);
  assert.equal(l.nodes.size, 3);
  assert.ok(inside(l.nodes.get("a"), l.groups[0]) && inside(l.nodes.get("c"), l.groups[0]));
});

test("layout of 5,000 trace-shaped nodes gives every node a place", () => {
  const nodes = [], edges = [];
  for (let i = 0; i < 5000; i++) {
    nodes.push(N(`n${i}`, i % 500 < 100 ? `g${Math.floor(i / 500)}` : null));
    if (i) edges.push({ src: `n${i - 1}`, dst: `n${i}` });
    if (i > 40) edges.push({ src: `n${i - 37}`, dst: `n${i}` });
  }
  const l = layoutCompound(nodes, edges);
  assert.equal(l.nodes.size, 5000);
  assert.equal(l.groups.length, 10);
  for (const e of edges) assert.ok(l.nodes.get(e.src).y < l.nodes.get(e.dst).y || nodes[+e.src.slice(1)].group);
});

const gnode = (id, label, extra = {}) => ({ id, label, kind: "call", executor: "torch", source: null, group: null, scope: null, ...extra });

test("search matches name, op, module and shape; next/previous wrap round", () => {
  const g = { nodes: [gnode("b1", "ltorch.linear", { scope: "h.0.attn", outputs: [["t1", "cpu f32[4, 64]"]] }),
    gnode("b2", "ltorch.softmax", { scope: "h.0.attn" }), gnode("b3", "ltorch.linear", { scope: "h.1.mlp" })], edges: [] };
  assert.deepEqual(searchNodes(g, "linear"), ["b1", "b3"]);
  assert.deepEqual(searchNodes(g, "LINEAR attn"), ["b1"]);
  assert.deepEqual(searchNodes(g, "f32[4, 64]"), ["b1"]);
  assert.deepEqual(searchNodes(g, "   "), []);
  assert.equal(nextMatch(["b1", "b3"], null), "b1");
  assert.equal(nextMatch(["b1", "b3"], "b1"), "b3");
  assert.equal(nextMatch(["b1", "b3"], "b3"), "b1");
  assert.equal(nextMatch(["b1", "b3"], "b1", -1), "b3");
  assert.equal(nextMatch([], "b1"), null);
});

test("change marks and legend say what claim and fuse did", () => {
  const claim = { added: [], removed: [], changed: ["b1", "b2", "b3"], executor: ["b1", "b2"], regrouped: [] };
  const m = changeMarks(claim);
  assert.equal(m.get("b1"), "executor");
  assert.equal(m.get("b3"), "changed");
  assert.match(changeSummary(claim), /~3 changed \(2 by executor assignment\)/);
  assert.deepEqual(changeLegend(claim).map((r) => [r.kind, r.count]), [["executor", 2], ["changed", 1]]);
  const fuse = { added: [], removed: [], changed: [], executor: [], regrouped: ["b1", "b2"] };
  assert.equal(changeMarks(fuse).get("b2"), "regrouped");
  assert.match(changeSummary(fuse), /2 moved into or between fusion regions/);
  assert.deepEqual(changeLegend(fuse).map((r) => r.kind), ["regrouped"]);
  // payloads from before executor/regrouped existed still read
  assert.match(changeSummary({ added: ["a"], removed: ["r"], changed: [] }), /\+1 added, ~0 changed, −1 removed/);
  assert.equal(changeSummary(null), "first step: nothing to compare with");
});

test("derived_from links a backward call to its forward call and back", () => {
  const fw = { nodes: [gnode("b5", "ltorch.linear"), gnode("b6", "ltorch.relu")], edges: [] };
  const bw = { nodes: [gnode("b20", "ltorch.linear_backward", { derived_from: "b5" }), gnode("b21", "ltorch.mul", { derived_from: "b5" }),
    gnode("b22", "ltorch.add", { derived_from: null })], edges: [] };
  const traces = { forward: fw, backward: bw };
  assert.deepEqual(crossLinks("backward", bw.nodes[0], traces), [{ trace: "forward", id: "b5", label: "ltorch.linear" }]);
  assert.deepEqual(crossLinks("forward", fw.nodes[0], traces).map((l) => l.id), ["b20", "b21"]);
  assert.deepEqual(crossLinks("forward", fw.nodes[1], traces), []);
  assert.deepEqual(crossLinks("backward", bw.nodes[2], traces), []);
});

test("details show inputs and outputs with types, executor, region, source, decline reasons", () => {
  const g = { nodes: [gnode("in:x", "x", { kind: "input" }),
    gnode("b1", "ltorch.linear", { group: "inductor0", source: "model.py:12", outputs: [["t1", "cpu f32[4, 64]"]] })],
    edges: [{ src: "in:x", dst: "b1", value: "x", type: "cpu f32[4, 32]" }] };
  const rows = nodeDetails(g, g.nodes[1], { mark: "executor", declines: [["nvfuser", "not elementwise"]] });
  const get = (k) => rows.filter((r) => r[0] === k).map((r) => r[1]);
  assert.deepEqual(get("input"), ["x: cpu f32[4, 32]"]);
  assert.deepEqual(get("output"), ["t1: cpu f32[4, 64]"]);
  assert.deepEqual(get("executor"), ["torch"]);
  assert.deepEqual(get("region"), ["inductor0"]);
  assert.deepEqual(get("source"), ["model.py:12"]);
  assert.deepEqual(get("not fused"), ["nvfuser: not elementwise"]);
  assert.match(get("this step")[0], /executor/);
});

test("labels are not cut: node widths fit the whole name and type line", () => {
  const long = gnode("b1", "ltorch.scaled_dot_product_attention_backward", { outputs: [["t", "cpu f32[2, 12, 1024, 64]"], ["u", "cpu f32[2]"]] });
  assert.equal(typeLine(long), "f32[2, 12, 1024, 64] +1");
  assert.ok(nodeWidth(long) >= long.label.length * 6.5);
  assert.deepEqual(executorsIn({ nodes: [long, gnode("b2", "a", { executor: "inductor" }), gnode("b3", "a", { executor: null })], edges: [] }), ["inductor", "torch"]);
});

test("collapsing groups still folds members into one node", () => {
  const g = { nodes: [gnode("b1", "a", { group: "R" }), gnode("b2", "b", { group: "R" }), gnode("b3", "c")],
    edges: [{ src: "b1", dst: "b2", value: "t", type: "" }, { src: "b2", dst: "b3", value: "u", type: "" }] };
  const c = collapseGroups(g, { by: "regions" }, new Set(["R"]));
  assert.deepEqual(c.nodes.map((n) => n.id), ["group:R", "b3"]);
  assert.deepEqual(c.edges.map((e) => [e.src, e.dst]), [["group:R", "b3"]]);
});
