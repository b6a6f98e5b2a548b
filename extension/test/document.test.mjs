// The record document viewer's reading of files and folders (src/lab/document/model.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readRecord, siblings } from "../build-test/lab.mjs";

const step = (index, spec) => ({ index, spec, seconds: 0, symbols_before: 1, symbols_after: 1, error: null,
  verification: null, notes: {}, traces: null });
const record = { schema: "thunderlab.record/v1", name: "f", inputs: [], pipeline: "dce", created: 0, error: null,
  compile_seconds: 0, steps: [step(0, "capture"), step(1, "dce")], regions: {} };

test("a saved record reads back as its payload", () => {
  const got = readRecord(JSON.stringify(record));
  assert.deepEqual(got, { payload: record });
});

test("an empty, cut-short or foreign file says what is wrong", () => {
  const said = (text) => readRecord(text).problems.map((p) => `${p.path || "the record"}: expected ${p.expected}, got ${p.got}`);
  assert.match(said("")[0], /^the record: expected a thunderlab record as JSON text, got an empty file/);
  assert.match(said("  \n")[0], /empty file/);
  assert.match(said(JSON.stringify(record).slice(0, 40))[0], /got text that is not JSON .*cut short/);
  assert.deepEqual(said("[1, 2]"), ["the record: expected a thunderlab record (a JSON object), got a list of 2 items"]);
  assert.match(said(JSON.stringify({ ...record, schema: "thunderlab.record/v9" }))[0], /got the string "thunderlab\.record\/v9"/);
  assert.deepEqual(said(JSON.stringify({ ...record, steps: [] })), ["steps: expected a list of at least 1 item, got a list of 0 items"]);
  assert.deepEqual(said(JSON.stringify({ ...record, steps: [{ ...record.steps[0], traces: 5 }] })),
    ["steps[0].traces: expected null or an object (name → a trace), got the number 5"]);
});

test("a folder's records are listed in name order, other files and folders left out", () => {
  const listing = [
    { name: "0002-b.thunderlab.json", path: "runs/0002-b.thunderlab.json", type: "file" },
    { name: "notes.json", path: "runs/notes.json", type: "file" },
    { name: "0001-a.thunderlab.json", path: "runs/0001-a.thunderlab.json", type: "file" },
    { name: "old.thunderlab.json", path: "runs/old.thunderlab.json", type: "directory" },
  ];
  assert.deepEqual(siblings(listing), ["runs/0001-a.thunderlab.json", "runs/0002-b.thunderlab.json"]);
});
