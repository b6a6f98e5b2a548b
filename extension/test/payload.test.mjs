// Tests the payload check every view runs before drawing (src/payload.ts). The fixtures are shared with
// tests/inspect/test_payload_fixtures.py, which checks the same cases with Python's jsonschema.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { checkPayload, checkTraces, problemText, expectedWords, gotWords, joinPath, KEYWORDS, ANNOTATIONS, MAX_PROBLEMS, SCHEMA }
  from "../build-test/payload.mjs";
import { StepModel } from "../build-test/lab.mjs";

const here = new URL(".", import.meta.url);
const read = (p) => JSON.parse(readFileSync(new URL(p, here), "utf8"));
const RECORD = read("fixtures/record.json");
const CASES = read("fixtures/malformed.json");
const SCHEMA_FILE = read("../../thunderlab/inspect/schema/record-v1.json");
const good = () => structuredClone(RECORD);

/** The payload a case describes (the same edits as broken() in tests/inspect/test_payload_fixtures.py). */
function broken(c) {
  if ("whole" in c) return c.whole;
  const p = good();
  const at = (path) => [path.slice(0, -1).reduce((o, k) => o[k], p), path[path.length - 1]];
  for (const [path, value] of c.set ?? []) { const [o, k] = at(path); o[k] = value; }
  for (const path of c.delete ?? []) { const [o, k] = at(path); delete o[k]; }
  for (const [path, keys] of c.keep ?? []) { const [o, k] = at(path); o[k] = Object.fromEntries(Object.entries(o[k]).filter(([x]) => keys.includes(x))); }
  return p;
}

test("a real payload, its summary and every step's traces pass the check", () => {
  assert.deepEqual(checkPayload(RECORD), []);
  const summary = { ...good(), steps: RECORD.steps.map((s) => ({ ...s, traces: null })) };
  assert.deepEqual(checkPayload(summary), []);
  for (const s of RECORD.steps) assert.deepEqual(checkTraces(s.traces, s.index), [], `step ${s.index}`);
  assert.deepEqual(checkTraces(null, 0), []);
});

test("the check implements every keyword the committed schema uses", () => {
  const known = new Set([...KEYWORDS, ...ANNOTATIONS]);
  const unknown = new Set();
  const walk = (s, inside) => {
    if (Array.isArray(s)) { s.forEach((x) => walk(x, inside)); return; }
    if (s === null || typeof s !== "object") return;
    for (const [k, v] of Object.entries(s)) {
      if (inside === "names") { walk(v, "schema"); continue; }  // property and $defs names are not keywords
      if (!known.has(k)) unknown.add(k);
      if (k === "properties" || k === "$defs") walk(v, "names");
      else if (k !== "const" && k !== "enum") walk(v, "schema");
    }
  };
  walk(SCHEMA_FILE, "schema");
  assert.deepEqual([...unknown], [], "record-v1.json uses keywords src/payload.ts does not check");
  assert.equal(SCHEMA_FILE.properties.schema.const, SCHEMA);
});

for (const c of CASES) {
  test(`malformed: ${c.why} -> ${c.path || "the record"}`, () => {
    const problems = checkPayload(broken(c));
    assert.ok(problems.length > 0, "accepted");
    assert.ok(problems.some((p) => p.path === c.path), `${JSON.stringify(problems.map((p) => p.path))} lacks ${c.path}`);
    for (const p of problems) assert.ok(p.expected && p.got, problemText(p));
  });
}

test("each problem says where, what the schema wants and what is there, in words", () => {
  const texts = (c) => checkPayload(broken(CASES.find((x) => x.why === c))).map(problemText);
  assert.deepEqual(texts("traces a number"), ["steps[1].traces: expected null or an object (name → a trace), got the number 5"]);
  assert.deepEqual(texts("traces a string"), ['steps[1].traces: expected null or an object (name → a trace), got the string "forward"']);
  assert.deepEqual(texts("traces a list"), ["steps[1].traces: expected null or an object (name → a trace), got a list of 0 items"]);
  assert.deepEqual(texts("a trace null"), ["steps[1].traces.forward: expected a trace, got null"]);
  assert.deepEqual(texts("null instead of a record"), ["the record: expected a thunderlab record (a JSON object), got null"]);
  assert.deepEqual(texts("steps empty"), ["steps: expected a list of at least 1 item, got a list of 0 items"]);
  assert.deepEqual(texts("a step index negative"), ["steps[1].index: expected a whole number ≥ 0, got the number -1"]);
  assert.deepEqual(texts("a step index not whole"), ["steps[1].index: expected a whole number ≥ 0, got the number 1.5"]);
  assert.deepEqual(texts("a step null"), ["steps[0]: expected a step, got null"]);
  assert.deepEqual(texts("regions a list"), ["regions: expected an object (name → a region), got a list of 0 items"]);
  assert.deepEqual(texts("error a number"), ["error: expected a string or null, got the number 3"]);
  assert.deepEqual(texts("created a string"), ['created: expected a number, got the string "today"']);
  // a step cut to two fields: each missing field named, with what it should be
  const cut = texts("a step cut short");
  assert.equal(cut.length, 7);
  assert.ok(cut.includes("steps[2].traces: expected null or an object (name → a trace), got nothing (the field is missing)"), cut.join("\n"));
  assert.ok(cut.includes("steps[2].seconds: expected a number ≥ 0, got nothing (the field is missing)"));
  const kind = texts("a graph node of an unknown kind");
  assert.deepEqual(kind, ['steps[1].traces.forward.graph.nodes[0].kind: expected one of "call", "input", "output", "region", "communication", ' +
    'got the string "<script>window.__pwned=1</script>"']);
});

test("another version's record gets one problem and a hint, not a list of its differences", () => {
  const problems = checkPayload({ ...good(), schema: "thunderlab.record/v9", steps: "whatever v9 has" });
  assert.equal(problems.length, 1);
  assert.equal(problemText(problems[0]), 'schema: expected "thunderlab.record/v1" (the version this viewer reads), got the string "thunderlab.record/v9"');
  assert.match(problems[0].hint, /another version of thunderlab/);
  assert.deepEqual(checkPayload({ name: "f" }).map((p) => p.path).slice(0, 2), ["schema", "inputs"]);
});

test("a field name with markup is named as written, quoted, never interpreted", () => {
  const evil = '<img src=x onerror="window.__pwned=2">';
  const [p] = checkPayload(broken(CASES.find((x) => x.why === "a field with markup for a name")));
  assert.equal(p.path, `steps[0][${JSON.stringify(evil)}]`);
  assert.match(p.expected, /^no such field \(a step has index, spec, seconds, .*traces\)$/);
  assert.equal(joinPath("regions", "fusion 0"), 'regions["fusion 0"]');
  assert.equal(joinPath("", "steps"), "steps");
  assert.equal(joinPath("steps", 3), "steps[3]");
});

test("words for values and schemas", () => {
  assert.equal(gotWords("x".repeat(100)), `the string "${"x".repeat(59)}…"`);
  assert.equal(gotWords({}), "an empty object");
  assert.equal(gotWords({ a: 1, b: 2, c: 3, d: 4, e: 5 }), 'an object with 5 fields ("a", "b", "c", "d", …)');
  assert.equal(gotWords(true), "true");
  assert.equal(gotWords([1]), "a list of 1 item");
  assert.equal(expectedWords(SCHEMA_FILE.$defs.region.properties.history.items), "a list [a number, a string]");
  assert.equal(expectedWords(SCHEMA_FILE.properties.kernels), "null or an object (name → a list)");
});

test("a payload broken everywhere stops at MAX_PROBLEMS", () => {
  const p = good();
  const nodes = p.steps[1].traces.forward.graph.nodes;
  for (let i = 0; i < 3 * MAX_PROBLEMS; i++) nodes.push({ ...nodes[0], kind: "nonsense" });
  assert.equal(checkPayload(p).length, MAX_PROBLEMS);
});

test("checkTraces names the step it was sent for", () => {
  assert.deepEqual(checkTraces(5, 3).map(problemText), ["steps[3].traces: expected null or an object (name → a trace), got the number 5"]);
  const traces = structuredClone(RECORD.steps[1].traces);
  delete traces.backward.graph;
  assert.deepEqual(checkTraces(traces, 1).map((p) => p.path), ["steps[1].traces.backward.graph"]);
});

// ---------------------------------------------------------------- the sidebar's step model

/** A kernel link that answers record.summary and step.traces with what the test gives it. */
const fakeLink = (summary, traces) => ({
  session: null,
  request: async (type, body) => (type === "record.summary" ? { record: body.record, payload: summary }
    : { record: body.record, step: body.step, traces: traces(body.step) }),
});

test("the sidebar's step model keeps a malformed summary's problems and hands no payload to the views", async () => {
  const summary = { ...good(), steps: RECORD.steps.map((s) => ({ ...s, traces: null })) };
  summary.steps[2] = { index: 2, spec: "claim" };
  const m = new StepModel(fakeLink(summary, () => null));
  await m.open(7);
  assert.equal(m.payload, null);
  assert.ok(m.problems.some((p) => problemText(p) === "steps[2].seconds: expected a number ≥ 0, got nothing (the field is missing)"));
  await m.open(null);
  assert.deepEqual(m.problems, []);
});

test("the sidebar's step model keeps malformed traces' problems for their step only", async () => {
  const summary = { ...good(), steps: RECORD.steps.map((s) => ({ ...s, traces: null })) };
  const m = new StepModel(fakeLink(summary, (i) => (i === 1 ? "not traces" : RECORD.steps[i].traces)));
  await m.open(7);
  assert.ok(m.payload);
  assert.deepEqual(m.problems, []);  // the last step's traces are fine
  await m.select(1);
  assert.equal(m.traces(1), null);
  assert.deepEqual(m.problems.map(problemText), ['steps[1].traces: expected null or an object (name → a trace), got the string "not traces"']);
  await m.select(0);
  assert.deepEqual(m.problems, []);
});
