// Tests the diff by stable call id and the step facts (src/calldiff.ts, src/stepinfo.ts, src/selection.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { alignCalls, changeWords, foldUnchanged, signatureOf, statementOf, summarizeCalls } from "../build-test/calldiff.mjs";
import { bytes, declineRows, noteLines, splitInputs, switches, verificationWords } from "../build-test/stepinfo.mjs";
import { SelectionModel, selectionOf } from "../build-test/selection.mjs";

// a printed trace: one line per call, the executor in the trailing comment as the printer writes it
function trace(calls) {
  const lines = ["def forward(x, w):"];
  const out = calls.map(([id, text, executor = null, region = null]) => {
    lines.push(`    ${text}  # cpu f32[4]${executor ? `  [${executor}]` : ""}`);
    return { id, line: lines.length, op: text.split("=")[1]?.trim().split("(")[0] ?? text, executor, region, origin: null, source: null };
  });
  lines.push("    return t2");
  return { program: lines.join("\n") + "\n", calls: out };
}

test("statementOf drops the printer's trailing comment and indentation", () => {
  assert.equal(statementOf("    t0 = ltorch.sin(x)            # cpu f32[4]  [torch]"), "t0 = ltorch.sin(x)");
  assert.equal(statementOf("    del t0"), "del t0");
});

test("claim's executor hand-out is a change, not 'no changes'", () => {
  const a = trace([["b1", "t0 = ltorch.sin(x)"], ["b2", "t1 = ltorch.cos(t0)"]]);
  const b = trace([["b1", "t0 = ltorch.sin(x)", "inductor"], ["b2", "t1 = ltorch.cos(t0)", "torch"]]);
  const rows = alignCalls(a, b);
  assert.deepEqual(rows.map((r) => r.kind), ["changed", "changed"]);
  assert.deepEqual(rows[0].why, ["executor none → inductor"]);
  const s = summarizeCalls(rows);
  assert.equal(s.changed, 2);
  assert.match(s.lines.join("\n"), /executor assignment: 1 none → inductor, 1 none → torch/);
  assert.doesNotMatch(s.lines[0], /no call changed/);
});

test("fuse says what was fused into which region, matched by stable id", () => {
  const a = trace([["b1", "t0 = ltorch.sin(x)", "inductor"], ["b2", "t1 = ltorch.cos(t0)", "inductor"], ["b3", "t2 = ltorch.mm(t1, w)", "torch"]]);
  const b = trace([["b1", "t0 = ltorch.sin(x)", "inductor", "inductor0"], ["b2", "t1 = ltorch.cos(t0)", "inductor", "inductor0"],
    ["b9", "t1, = inductor0(x)", "inductor"], ["b3", "t2 = ltorch.mm(t1, w)", "torch"]]);
  const rows = alignCalls(a, b);
  assert.deepEqual(rows.map((r) => [r.id, r.kind]), [["b1", "changed"], ["b2", "changed"], ["b9", "added"], ["b3", "same"]]);
  assert.deepEqual(rows[0].why, ["fused into inductor0"]);
  const s = summarizeCalls(rows, (r) => (r === "inductor0" ? "inductor" : null));
  assert.ok(s.lines.includes("fused 2 calls into 1 region: inductor0 (2 calls, inductor)"), s.lines.join("\n"));
});

test("removed calls sit after the call that preceded them; renamed text is a rewrite", () => {
  const a = trace([["b1", "t0 = ltorch.sin(x)"], ["b2", "t1 = ltorch.sin(x)"], ["b3", "t2 = ltorch.add(t0, t1)"]]);
  const b = trace([["b1", "t0 = ltorch.sin(x)"], ["b3", "t2 = ltorch.add(t0, t0)"]]);
  const rows = alignCalls(a, b);
  assert.deepEqual(rows.map((r) => [r.id, r.kind]), [["b1", "same"], ["b2", "removed"], ["b3", "changed"]]);
  assert.deepEqual(rows[2].why, ["rewritten"]);
  const first = alignCalls(trace([["b0", "t9 = ltorch.cos(x)"], ["b1", "t0 = ltorch.sin(x)"]]), trace([["b1", "t0 = ltorch.sin(x)"]]));
  assert.deepEqual(first.map((r) => r.id), ["b0", "b1"]);
});

test("changeWords names region moves and executor changes", () => {
  const s = (executor, region, text = "x") => ({ text, executor, region });
  assert.deepEqual(changeWords(s("torch", null), s("torch", null)), []);
  assert.deepEqual(changeWords(s("inductor", "r0"), s("inductor", "r1")), ["moved from r0 to r1"]);
  assert.deepEqual(changeWords(s("inductor", "r0"), s("torch", null, "y")), ["taken out of r0", "executor inductor → torch", "rewritten"]);
});

test("foldUnchanged keeps context around changes and folds long unchanged runs", () => {
  const rows = Array.from({ length: 20 }, (_, i) => ({ kind: i === 10 ? "changed" : "same", id: `b${i}`, a: null, b: null, why: [] }));
  const shown = foldUnchanged(rows, 2);
  assert.deepEqual(shown.map((s) => ("row" in s ? s.row.id : `fold${s.fold.length}`)), ["fold8", "b8", "b9", "b10", "b11", "b12", "fold7"]);
  const total = shown.reduce((n, s) => n + ("row" in s ? 1 : s.fold.length), 0);
  assert.equal(total, 20, "every row is drawn or folded, none lost");
  assert.deepEqual(foldUnchanged([rows[0]], 2).map((s) => "row" in s), [true], "a run of one is not folded");
});

test("alignCalls on 5,000 calls matches every surviving id once", () => {
  const n = 5000;
  const a = trace(Array.from({ length: n }, (_, i) => [`b${i}`, `t${i} = ltorch.sin(x)`, "torch"]));
  const b = trace(Array.from({ length: n }, (_, i) => [i % 10 === 0 ? `c${i}` : `b${i}`, `t${i} = ltorch.sin(x)`, i % 7 ? "torch" : "inductor"]));
  const rows = alignCalls(a, b);
  const s = summarizeCalls(rows);
  assert.equal(s.added, 500);
  assert.equal(s.removed, 500);
  assert.equal(rows.length, 5500);
  assert.equal(new Set(rows.map((r) => r.id)).size, 5500);
});

test("signatureOf finds the main function after the region functions", () => {
  assert.equal(signatureOf("def inductor0(a):\n    return a\n\ndef forward(x, w):\n    return x\n"), "def forward(x, w):");
});

test("verificationWords tells numbers compared from structure only", () => {
  assert.match(verificationWords({ ok: true, structural: "ok", max_error: 1e-7, detail: "" }).text, /numbers match eager/);
  assert.equal(verificationWords({ ok: true, structural: "ok", max_error: null, detail: "" }).text, "✓ structure only");
  assert.match(verificationWords({ ok: false, structural: "t3 used before defined", max_error: null, detail: "" }).text, /✗ t3 used before/);
  assert.equal(verificationWords(null).text, "not checked");
});

test("splitInputs keeps the user's arguments apart from lifted parameters", () => {
  const { args, params } = splitInputs([{ name: "args_0", type: "i64[2, 16]" }, { name: "transformer_h_0_ln_1_weight", type: "f32[64]" },
    { name: "bn_running_mean", type: "f32[8]" }, { name: "x", type: "f32[4]" }, { name: "fc_bias", type: "f32[4]" }]);
  assert.deepEqual(args.map((a) => a.name), ["args_0", "x"]);
  assert.deepEqual(params.map((a) => a.name), ["transformer_h_0_ln_1_weight", "bn_running_mean", "fc_bias"]);
});

test("noteLines reads every pass's notes one way: the summary, each named fact, how many calls were declined", () => {
  const claim = { summary: "1 decomposed, 3 kept whole", facts: { kept_whole: 3, decomposed: 1, decomposed_symbols: ["ltorch.gelu"], by_executor: { inductor: 3, torch: 1 } },
    declines: [[4, "nvfuser", "no GPU"], [4, "inductor", "opaque"]] };
  assert.deepEqual(noteLines(claim), ["1 decomposed, 3 kept whole", "kept whole: 3", "decomposed: 1", "decomposed symbols: ltorch.gelu",
    "by executor: inductor 3, torch 1", '1 calls were declined by at least one executor (see "why not fused" below)']);
  const fuse = { summary: "1 region from 22 calls", facts: { regions: { inductor0: { executor: "inductor", members: 22 } } }, declines: [] };
  assert.deepEqual(noteLines(fuse), ["1 region from 22 calls", "regions: 1 entries"]);
  assert.deepEqual(noteLines({ summary: "", facts: {}, declines: [] }), []);
  assert.deepEqual(noteLines({ summary: "", facts: { removed: 3, traceback: "..." }, declines: [] }), ["removed: 3"]);
  assert.equal(noteLines({ summary: "", facts: { names: "x".repeat(300) }, declines: [] })[0].length, "names: ".length + 200);
});

test("noteLines and declineRows read notes written before they were typed (a plain dict of facts)", () => {
  assert.deepEqual(noteLines({ kept_whole: 3, declines: { 4: [["nvfuser", "no GPU"]] } }),
    ["kept whole: 3", '1 calls were declined by at least one executor (see "why not fused" below)']);
  assert.deepEqual(noteLines({ summary: "2 bucket(s)", world: 4 }), ["2 bucket(s)", "world: 4"]);
  assert.deepEqual(noteLines({}), []);
  const step = (notes) => ({ index: 0, spec: "", seconds: 0, symbols_before: 0, symbols_after: 0, error: null, verification: null, notes, traces: null });
  const p = { steps: [step({}), step({ declines: { 5: [["nvfuser", "no GPU"]] } }), step({ left_out: { 5: "not fusible" } })] };
  assert.deepEqual(declineRows(p, 2), [{ id: "b5", reasons: [["nvfuser", "no GPU"], ["fuse", "not fusible"]] }]);
});

test("declineRows gathers every step's declines up to the step, claim's then fuse's left-outs", () => {
  const step = (spec, notes) => ({ index: 0, spec, seconds: 0, symbols_before: 0, symbols_after: 0, error: null, verification: null, notes, traces: null });
  const p = { steps: [step("capture", { summary: "", facts: {}, declines: [] }),
    step("claim", { summary: "", facts: {}, declines: [[5, "nvfuser", "no GPU"]] }),
    step("fuse", { summary: "", facts: {}, declines: [[5, "fuse", "not fusible"], [7, "fuse", "opaque"]] })] };
  p.steps.forEach((s, i) => (s.index = i));
  assert.deepEqual(declineRows(p, 0), []);
  assert.deepEqual(declineRows(p, 1), [{ id: "b5", reasons: [["nvfuser", "no GPU"]] }]);
  assert.deepEqual(declineRows(p, 2), [{ id: "b5", reasons: [["nvfuser", "no GPU"], ["fuse", "not fusible"]] }, { id: "b7", reasons: [["fuse", "opaque"]] }]);
});

test("switches reports when a region changed version, after its first run", () => {
  assert.deepEqual(switches([[100, "torch"], [101.5, "inductor"]]), [{ version: "torch", after_s: 0 }, { version: "inductor", after_s: 1.5 }]);
  assert.deepEqual(switches([]), []);
  assert.equal(bytes(1536), "1.5 KiB");
});

test("the selection model tells every listener but ignores a repeat", () => {
  const m = new SelectionModel();
  const seen = [];
  const stop = m.onChange((id, from) => seen.push([id, from]));
  m.selectNode("b3", "graph");
  m.selectNode("b3", "program");
  m.selectNode(null);
  stop();
  m.selectNode("b4");
  assert.deepEqual(seen, [["b3", "graph"], [null, ""]]);
  const owner = {};
  assert.equal(selectionOf(owner), selectionOf(owner));
  assert.notEqual(selectionOf(owner), selectionOf({}));
});
