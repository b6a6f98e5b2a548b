// Tests the pure helpers of the record page (src/record.ts) and the graph's grouping (node has no DOM).
// `npm test` builds build-test/*.mjs first.
import { test } from "node:test";
import assert from "node:assert/strict";
import { defaultDepth, defaultGrouping, collapseGroups, scopeAt } from "../build-test/graph.mjs";
import { origin, passName, pipelinePasses } from "../build-test/record.mjs";

const node = (id, kind = "call", group = null) => ({ id, label: id, kind, executor: kind === "call" ? "torch" : null, source: null, group });
const edge = (src, dst) => ({ src, dst, value: `${src}_out`, type: "f32[4]" });

test("passName strips options and the disabled marker", () => {
  assert.equal(passName("remat{budget=3}"), "remat");
  assert.equal(passName(" -cse "), "cse");
  assert.equal(passName("capture"), "capture");
});

test("where the graph came from is the capture step's summary, the graph break's explanation its detail", () => {
  const step0 = (notes) => ({ steps: [{ index: 0, spec: "capture", notes }] });
  const summary = "TorchDynamo frame 1/0: f from line 4 on, after a graph break (m.py); ends at a graph break at m.py:5 `if x.sum() > 0:` (generic_jump)";
  const detail = "generic_jump TensorVariable()\n  Hint: use torch.cond";
  assert.deepEqual(origin(step0({ summary, facts: { compile_id: "1/0", graph_break: { reason: "generic_jump", detail } }, declines: [] })),
    { text: `from ${summary}`, detail });
  assert.deepEqual(origin(step0({ summary: "TorchDynamo frame 0/0", facts: { compile_id: "0/0" }, declines: [] })),
    { text: "from TorchDynamo frame 0/0", detail: "" });
  // records written before captures said where they came from, and re-runs of a loaded record, say nothing
  assert.equal(origin(step0({})), null);
  assert.equal(origin(step0({ summary: "", facts: { loaded_from: "r.thunderlab.json" }, declines: [] })), null);
});

test("pipelinePasses splits outside option braces", () => {
  assert.deepEqual(pipelinePasses("dce, remat{budget=3,x=1},-cse,claim"), ["dce", "remat", "claim"]);
});

test("module scopes: cut at a depth, a default depth at the layers, and folding a group into one node", () => {
  assert.equal(scopeAt("transformer.h.0.attn", 3), "transformer.h.0");
  assert.equal(scopeAt("transformer", 3), null);
  assert.equal(scopeAt(null, 1), null);
  const n = (id, scope) => ({ id, label: id, kind: "call", executor: "torch", source: null, group: null, scope });
  const graph = {
    nodes: [n("in:x", null), n("a", "transformer.wte"), n("b", "transformer.h.0.attn"), n("c", "transformer.h.0.mlp"),
            n("d", "transformer.h.1.attn"), n("e", "transformer.h.1.mlp"), n("out", null)],
    edges: [edge("in:x", "a"), edge("a", "b"), edge("b", "c"), edge("c", "d"), edge("d", "e"), edge("b", "e"), edge("e", "out")],
  };
  // depth 1 and 2 each give one group with two or more nodes; depth 3 gives the two layers
  assert.equal(defaultDepth(graph), 3);
  assert.deepEqual(defaultGrouping(graph), { by: "modules", depth: 3 });
  const folded = collapseGroups(graph, { by: "modules", depth: 3 }, new Set(["transformer.h.0"]));
  const ids = folded.nodes.map((x) => x.id);
  assert.deepEqual(ids, ["in:x", "a", "group:transformer.h.0", "d", "e", "out"]);
  assert.equal(folded.nodes[2].label, "▸ transformer.h.0 (2)");
  assert.equal(folded.nodes[2].scope, "transformer.h.0");
  // edges into and out of the group are redirected; the one inside (b -> c) is gone
  const pairs = folded.edges.map((e) => `${e.src}>${e.dst}`);
  assert.deepEqual(pairs, ["in:x>a", "a>group:transformer.h.0", "group:transformer.h.0>d", "d>e", "group:transformer.h.0>e", "e>out"]);
  // fusion regions take precedence when there are any
  assert.deepEqual(defaultGrouping({ nodes: [...graph.nodes, { ...n("f", null), group: "fusion0" }], edges: [] }), { by: "regions" });
});
