// Communication beside compute (src/communication.ts): the payload's "communication" (timing=True under ddp/fsdp)
// as the sidebar's timings panel and the step page's Timings pane show it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { communicationRows, perCall, COMM_COLOR } from "../build-test/communication.mjs";
import { checkPayload } from "../build-test/payload.mjs";

const RECORD = JSON.parse(readFileSync(new URL("fixtures/record.json", import.meta.url), "utf8"));

// two buckets' all-reduces in a backward, three training steps; one broadcast at the start
const COMM = {
  all_reduce: { count: 6, median_s: 0.002, min_s: 0.001, total_s: 0.015, blocked_median_s: 0.0005, blocked_total_s: 0.004 },
  broadcast: { count: 1, median_s: 0.003, min_s: 0.003, total_s: 0.003, blocked_median_s: 0.003, blocked_total_s: 0.003 },
};
// a forward region and a backward one, each run once per call: three calls, the backward's fused version running
const REGIONS = {
  fusion_0: { version: "torch", timings: { torch: { count: 3, median_s: 0.004, min_s: 0.003 } } },
  fusion_1: { version: "inductor", timings: { torch: { count: 1, median_s: 0.009, min_s: 0.009 }, inductor: { count: 2, median_s: 0.006, min_s: 0.005 } } },
};

test("one row per collective in milliseconds, the costliest in flight first", () => {
  const rows = communicationRows(COMM);
  assert.deepEqual(rows.map((r) => r.collective), ["all_reduce", "broadcast"]);
  assert.equal(rows[0].count, 6);
  assert.ok(Math.abs(rows[0].median_ms - 2) < 1e-9 && Math.abs(rows[0].blocked_total_ms - 4) < 1e-9);
  assert.deepEqual(communicationRows(undefined), []);
  assert.deepEqual(communicationRows({}), []);
});

test("per call: compute is the regions' running medians summed, communication the exchanges' time over the calls", () => {
  const b = perCall(REGIONS, COMM);
  assert.equal(b.calls, 3);  // the most-called region ran three times (versions summed)
  assert.ok(Math.abs(b.compute_ms - (4 + 6)) < 1e-9);  // fusion_1 runs its inductor version now
  assert.ok(Math.abs(b.in_flight_ms - 18 / 3) < 1e-9);
  assert.ok(Math.abs(b.blocked_ms - 7 / 3) < 1e-9);
  assert.ok(Math.abs(b.exchanges - 7 / 3) < 1e-9);
  // no region timed: communication in all, compute unknown
  const t = perCall({ fusion_0: { version: "torch", timings: {} } }, COMM);
  assert.equal(t.calls, null);
  assert.equal(t.compute_ms, null);
  assert.ok(Math.abs(t.in_flight_ms - 18) < 1e-9);
  // nothing exchanged: nothing to show
  assert.equal(perCall(REGIONS, {}), null);
  assert.equal(perCall(REGIONS, undefined), null);
});

test("the colour is the graph's communication colour", async () => {
  const graph = await import("../build-test/graph.mjs");
  assert.match(COMM_COLOR, /^#[0-9a-f]{6}$/);
  if ("COMM_COLOR" in graph) assert.equal(graph.COMM_COLOR, COMM_COLOR);
});

test("a payload carrying communication timings follows the schema; a malformed one is named", () => {
  assert.deepEqual(checkPayload({ ...RECORD, communication: COMM }), []);
  assert.deepEqual(checkPayload({ ...RECORD, communication: {} }), []);
  const bad = checkPayload({ ...RECORD, communication: { all_reduce: { ...COMM.all_reduce, count: "six" } } });
  assert.equal(bad.length, 1);
  assert.match(bad[0].path, /communication.*all_reduce.*count/);
  const missing = checkPayload({ ...RECORD, communication: { all_reduce: { count: 1 } } });
  assert.ok(missing.length >= 1);
});
