// The record document viewer's reading of files and folders (src/lab/document/model.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readRecord, siblings } from "../build-test/lab.mjs";

const step = (index, spec) => ({ index, spec, seconds: 0, symbols_before: 1, symbols_after: 1, error: null,
  verification: null, notes: null, traces: null });
const record = { schema: "thunderlab.record/v1", name: "f", inputs: [], pipeline: "dce", created: 0, error: null,
  compile_seconds: 0, steps: [step(0, "capture"), step(1, "dce")], regions: {} };

test("a saved record reads back as its payload", () => {
  const got = readRecord(JSON.stringify(record));
  assert.deepEqual(got, { payload: record });
});

test("an empty, cut-short or foreign file says what is wrong", () => {
  assert.match(readRecord("").problem, /empty/);
  assert.match(readRecord("  \n").problem, /empty/);
  assert.match(readRecord(JSON.stringify(record).slice(0, 40)).problem, /not JSON/);
  assert.match(readRecord("[1, 2]").problem, /not a thunderlab record/);
  assert.match(readRecord(JSON.stringify({ ...record, schema: "thunderlab.record/v9" })).problem, /thunderlab\.record\/v9/);
  assert.match(readRecord(JSON.stringify({ ...record, steps: [] })).problem, /no steps/);
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
