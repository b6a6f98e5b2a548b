// Tests the sidebar's models and pure logic (src/lab/pure.ts); `npm test` builds build-test/lab.mjs first.
import { test } from "node:test";
import assert from "node:assert/strict";
import { capturedTag, classify, moved, originTag, parsePipeline, printPipeline, PipelineModel, stepOf, RecordsModel, visibleRows,
  TimingsModel, timingRows, totalCalls } from "../build-test/lab.mjs";
import { alignLines } from "../build-test/textdiff.mjs";

test("a pipeline string reads into passes and prints back as thunderlab's parser writes it", () => {
  const text = "dce, -cse ,claim{executors=torch+inductor, decompose=all},fuse,del";
  const items = parsePipeline(text);
  assert.deepEqual(items.map((p) => [p.name, p.enabled]), [["dce", true], ["cse", false], ["claim", true], ["fuse", true], ["del", true]]);
  assert.deepEqual(items[2].options, [["executors", "torch+inductor"], ["decompose", "all"]]);
  assert.equal(printPipeline(items), "dce,-cse,claim{executors=torch+inductor,decompose=all},fuse,del");
  assert.deepEqual(parsePipeline(" , "), []);
});

test("moved puts an item at its new index and leaves the input alone", () => {
  const a = ["a", "b", "c", "d"];
  assert.deepEqual(moved(a, 3, 1), ["a", "d", "b", "c"]);
  assert.deepEqual(moved(a, 0, 3), ["b", "c", "d", "a"]);
  assert.deepEqual(moved(a, 9, 0), a);
  assert.deepEqual(a, ["a", "b", "c", "d"]);
});

test("PipelineModel: drag, toggle, add, options; every edit undone in turn; checks reset on edit", () => {
  const m = new PipelineModel();
  let changes = 0;
  m.changed.connect(() => changes++);
  m.load("dce,cse,claim,fuse,del");
  assert.equal(m.check.state, "ok");
  assert.ok(!m.edited && !m.canUndo);
  m.move(3, 1);
  assert.equal(m.text, "dce,fuse,cse,claim,del");
  assert.equal(m.check.state, "unchecked", "an edit needs the kernel's check again");
  m.toggle(2);
  m.setOption(3, "executors", "torch");
  m.insert("remat", 4);
  assert.equal(m.text, "dce,fuse,-cse,claim{executors=torch},remat,del");
  m.setOption(3, "executors", "");
  assert.equal(m.text, "dce,fuse,-cse,claim,remat,del");
  m.move(1, 1);  // no change: nothing to undo
  for (const want of ["dce,fuse,-cse,claim{executors=torch},remat,del", "dce,fuse,-cse,claim{executors=torch},del",
    "dce,fuse,-cse,claim,del", "dce,fuse,cse,claim,del", "dce,cse,claim,fuse,del"]) {
    m.undo();
    assert.equal(m.text, want);
  }
  assert.ok(!m.canUndo && !m.edited);
  assert.ok(changes >= 11);
  m.setCheck({ state: "invalid", error: "pass 'fuse' requires 'claim' to run before it" });
  assert.equal(m.check.error, "pass 'fuse' requires 'claim' to run before it");
});

test("stepOf: a pass shows its record step only while it and everything before it are unchanged", () => {
  const steps = [{ spec: "capture" }, { spec: "dce" }, { spec: "cse" }, { spec: "claim{executors=torch}" }, { spec: "del" }];
  const same = parsePipeline("dce,cse,claim{executors=torch},del");
  assert.deepEqual(same.map((_, i) => stepOf(same, i, steps)), [1, 2, 3, 4]);
  const off = parsePipeline("dce,-cse,claim{executors=torch},del");
  assert.deepEqual(off.map((_, i) => stepOf(off, i, steps)), [1, null, null, null]);
  const swapped = parsePipeline("cse,dce,claim{executors=torch},del");
  assert.deepEqual(swapped.map((_, i) => stepOf(swapped, i, steps)), [null, null, null, null]);
});

const row = (record, name) => ({ record, name, created: record, pipeline: "dce", steps: 2, error: null, graph: 0, inputs: [], reused: 0 });

test("records: newest first, filtered by name in any case, paged", () => {
  const rows = Array.from({ length: 120 }, (_, i) => row(i, i % 3 ? `fn${i}` : `Block${i}`));
  const first = visibleRows(rows, "", 0);
  assert.equal(first.total, 120);
  assert.equal(first.pages, 3);
  assert.equal(first.rows[0].record, 119);
  assert.equal(visibleRows(rows, "", 9).rows[0].record, 19, "past the last page: the last page");
  const blocks = visibleRows(rows, "bLoCk", 0);
  assert.equal(blocks.total, 40);
  assert.ok(blocks.rows.every((r) => r.name.startsWith("Block")));
  const m = new RecordsModel();
  const picked = [];
  m.selectedChanged.connect((_, r) => picked.push(r));
  m.reset([row(0, "a"), row(1, "b")]);
  m.add(row(2, "c <script>"));
  assert.deepEqual(m.view().rows.map((r) => r.record), [2, 1, 0]);
  m.select(2); m.select(2);
  m.reset([row(0, "a")]);
  assert.deepEqual(picked, [2, null], "a selection that no longer exists is dropped");
});

test("classify tells replies, errors and events apart and ignores other protocol versions", () => {
  assert.deepEqual(classify({ v: 1, type: "records.list.reply", reply_to: 3, total: 0 }).kind, "reply");
  assert.deepEqual(classify({ v: 1, type: "error", reply_to: 4, error: "no field 'x'" }), { kind: "error", to: 4, error: "no field 'x'" });
  assert.equal(classify({ v: 1, type: "record.new", record: 1 }).kind, "event");
  assert.equal(classify({ v: 2, type: "record.new" }).kind, "ignored");
  assert.equal(classify("hello").kind, "ignored");
  assert.equal(classify({ v: 1, type: "records.list.reply" }).kind, "ignored", "a reply without reply_to");
});

test("timings: rows per region and version, totals, a history that restarts for another record", () => {
  const ev = (record, n) => ({ record, regions: {
    fusion0: { executor: "inductor", version: "inductor", device: "cpu", timings: { torch: { count: 1, median_s: 0.002, min_s: 0.002 }, inductor: { count: n, median_s: 0.001, min_s: 0.0005 } } } } });
  const rows = timingRows(ev(0, 4));
  assert.deepEqual(rows.map((r) => [r.version, r.running, r.count]), [["torch", false, 1], ["inductor", true, 4]]);
  assert.equal(rows[1].median_ms, 1);
  assert.equal(totalCalls(ev(0, 4)), 5);
  const m = new TimingsModel();
  m.update(ev(0, 1)); m.update(ev(0, 5));
  assert.deepEqual(m.history, [2, 6]);
  m.update(ev(1, 1));
  assert.deepEqual(m.history, [2]);
});

test("alignLines pairs lines side by side along a shortest edit script", () => {
  const a = ["def f(x):", "  t0 = a(x)", "  t1 = b(t0)", "  return t1"];
  const b = ["def f(x):", "  t1 = b2(x)", "  t2 = c(t1)", "  return t1", "# end"];
  const rows = alignLines(a, b);
  assert.deepEqual(rows.map((r) => r.kind), ["same", "change", "change", "same", "add"]);
  assert.deepEqual(rows.map((r) => r.a).filter((x) => x !== null), a);
  assert.deepEqual(rows.map((r) => r.b).filter((x) => x !== null), b);
  assert.deepEqual(alignLines([], []), []);
  assert.deepEqual(alignLines(["x"], []).map((r) => r.kind), ["del"]);
  // random lists: both sides are recovered, and equal lines are never reported as changed
  for (let seed = 1; seed < 200; seed++) {
    let s = seed;
    const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) % 5);
    const x = Array.from({ length: rnd() * 3 }, rnd).map(String), y = Array.from({ length: rnd() * 3 }, rnd).map(String);
    const r = alignLines(x, y);
    assert.deepEqual(r.map((q) => q.a).filter((q) => q !== null), x);
    assert.deepEqual(r.map((q) => q.b).filter((q) => q !== null), y);
    assert.ok(r.every((q) => q.kind !== "same" || q.a === q.b));
  }
});

test("alignLines handles two 5,000-line programs quickly", () => {
  const a = Array.from({ length: 5000 }, (_, i) => `  t${i} = op(t${i - 1})`);
  const b = a.map((l, i) => (i % 50 === 0 ? l.replace("op", "op2") : l));
  const t0 = performance.now();
  const rows = alignLines(a, b);
  const ms = performance.now() - t0;
  assert.equal(rows.filter((r) => r.kind === "change").length, 100);
  assert.ok(ms < 1000, `took ${ms} ms`);
});

test("a record's row says what made its graph: compiled again, or cut by graph breaks", () => {
  const o = (graph_break, resumed, recompiled) => ({ summary: "TorchDynamo frame 0/1: f (m.py:3)", graph_break, resumed, recompiled });
  assert.equal(originTag(o(false, false, false)), "");
  assert.equal(originTag(null), "");
  assert.equal(originTag(undefined), "");  // a kernel of an older thunderlab sends no origin
  assert.equal(originTag(o(true, false, false)), "up to a graph break");
  assert.equal(originTag(o(false, true, false)), "after a graph break");
  assert.equal(originTag(o(true, true, false)), "between graph breaks");
  assert.equal(originTag(o(false, false, true)), "compiled again");
  assert.equal(originTag(o(true, false, true)), "compiled again, up to a graph break");
});

test("a record's row says how many calls its graph ran as captured, and why, or nothing", () => {
  assert.deepEqual(capturedTag(0), { text: "", title: "" });
  assert.deepEqual(capturedTag(undefined), { text: "", title: "" });  // a kernel of an older thunderlab sends none
  assert.equal(capturedTag(1).text, "1 call as captured");
  const t = capturedTag(712);
  assert.equal(t.text, "712 calls as captured");
  assert.match(t.title, /sizes kept changing/);
  assert.match(t.title, /set_limits\(new_sizes=/);
});
