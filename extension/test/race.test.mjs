// The executor race per region (src/race.ts): the payload's regions[name].race as the step page's Timings pane,
// the HTML report and the sidebar's timings panel show it, and the schema's word on race fields.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { raceRows, raceSummary } from "../build-test/race.mjs";
import { checkPayload } from "../build-test/payload.mjs";

const RECORD = JSON.parse(readFileSync(new URL("fixtures/record.json", import.meta.url), "utf8"));

const t = (ms, n = 4) => ({ count: n, median_s: ms / 1e3, min_s: (ms * 0.9) / 1e3 });
// one region whose kernel won, one whose kernel lost to torch, one still racing (nvfuser not timed yet)
const REGIONS = {
  inductor0: { race: { state: "done", versions: ["inductor", "torch"], calls: 4, times: { inductor: t(0.41), torch: t(0.62) },
    winner: "inductor", why: "inductor 0.41 ms vs torch 0.62 ms, fastest of 4 calls each: kept inductor" } },
  inductor1: { race: { state: "done", versions: ["inductor", "torch"], calls: 4, times: { inductor: t(0.5), torch: t(0.2) },
    winner: "torch", why: "torch 0.2 ms vs inductor 0.5 ms, fastest of 4 calls each: back to torch" } },
  nvfuser0: { race: { state: "racing", versions: ["nvfuser", "torch", "inductor"], calls: 4, times: { torch: t(1, 2), nvfuser: t(0.3, 1) },
    winner: null, why: "racing" } },
  unraced: { race: null },
  old: {},
};

test("one row per raced region; its lanes fastest first, bars a fraction of the slowest, the winner marked", () => {
  const rows = raceRows(REGIONS);
  assert.deepEqual(rows.map((r) => r.region), ["inductor0", "inductor1", "nvfuser0"]);  // no race, no row
  const [won, lost, racing] = rows;
  assert.deepEqual(won.lanes.map((l) => [l.version, l.winner]), [["inductor", true], ["torch", false]]);
  assert.ok(Math.abs(won.lanes[0].median_ms - 0.41) < 1e-9 && Math.abs(won.lanes[1].frac - 1) < 1e-9);
  assert.ok(Math.abs(won.lanes[0].frac - 0.41 / 0.62) < 1e-9);
  assert.equal(lost.winner, "torch");
  assert.deepEqual(lost.lanes.map((l) => l.version), ["torch", "inductor"]);
  assert.match(lost.why, /back to torch$/);
  // a version not timed yet has a lane with no time, last
  assert.deepEqual(racing.lanes.map((l) => [l.version, l.median_ms === null]), [["nvfuser", false], ["torch", false], ["inductor", true]]);
  assert.equal(racing.lanes[2].frac, 0);
  assert.deepEqual(raceRows({}), []);
});

test("the races in one line", () => {
  const rows = raceRows(REGIONS);
  assert.equal(raceSummary(rows), "2 of 3 regions raced; 1 kept a kernel, 1 back to torch; 1 racing now");
  assert.equal(raceSummary([]), "");
  const off = raceRows({ r: { race: { state: "off", versions: [], calls: 4, times: {}, winner: null, why: "not raced: copy_ writes" } } });
  assert.equal(raceSummary(off), "0 of 1 region raced; 1 not raced");
  // a race whose graph TorchDynamo compiled again for other inputs stops being called: paused, not racing now
  const paused = raceRows({ r: { race: { state: "paused", versions: ["inductor", "torch"], calls: 4, times: { torch: t(1, 2) }, winner: null,
    why: "paused: no call for 41 s, 2 of 4 timed calls each made (inductor, torch); the race goes on at the region's next call" } } });
  assert.equal(raceSummary(paused), "0 of 1 region raced; 1 paused (not called lately)");
});

test("a payload with races follows the schema, one without stays valid, a malformed race is named", () => {
  const name = Object.keys(RECORD.regions)[0];
  assert.ok(name, "the fixture has a region");
  assert.ok(!("race" in RECORD.regions[name]), "the fixture predates races");
  assert.deepEqual(checkPayload(RECORD), []);
  const raced = { ...RECORD, regions: { ...RECORD.regions, [name]: { ...RECORD.regions[name], race: REGIONS.inductor0.race } } };
  assert.deepEqual(checkPayload(raced), []);
  const paused = { ...RECORD, regions: { ...RECORD.regions, [name]: { ...RECORD.regions[name], race: { ...REGIONS.nvfuser0.race, state: "paused" } } } };
  assert.deepEqual(checkPayload(paused), []);
  const bad = { ...RECORD, regions: { ...RECORD.regions, [name]: { ...RECORD.regions[name], race: { ...REGIONS.inductor0.race, state: "won" } } } };
  const problems = checkPayload(bad);
  assert.equal(problems.length, 1);
  assert.match(problems[0].path, new RegExp(`regions.*${name}.*race.*state`));
});

test("a kernel compiled again for other input strides says so under its race; the schema takes the field", async () => {
  const { layoutsLine } = await import("../build-test/race.mjs");
  const layouts = { compiled: 1, compiling: true, fallback_calls: 3 };
  const rows = raceRows({ inductor0: { ...REGIONS.inductor0, layouts }, inductor1: REGIONS.inductor1 });
  assert.equal(rows[0].layouts, "kernel compiled again for 1 more input layout; one more compiling now; "
    + "3 calls ran torch meanwhile (left out of the race)");
  assert.equal(rows[1].layouts, "");  // no field: a kernel compiled here, or never called with other strides
  assert.equal(layoutsLine({ compiled: 0, compiling: false, fallback_calls: 0 }), "");
  assert.equal(layoutsLine({ compiled: 2, compiling: false, fallback_calls: 1 }),
    "kernel compiled again for 2 more input layouts; 1 call ran torch meanwhile (left out of the race)");
  const name = Object.keys(RECORD.regions)[0];
  const region = { ...RECORD.regions[name], race: REGIONS.inductor0.race };
  assert.deepEqual(checkPayload({ ...RECORD, regions: { ...RECORD.regions, [name]: { ...region, layouts } } }), []);
  const bad = checkPayload({ ...RECORD, regions: { ...RECORD.regions, [name]: { ...region, layouts: { ...layouts, compiled: -1 } } } });
  assert.equal(bad.length, 1);
  assert.match(bad[0].path, /layouts.*compiled/);
});

test("a kernel's linear layers: how many went to oneDNN, the time it saved there, GELUs fused; the schema checks the field", async () => {
  const { gemmLine, gemmDetail } = await import("../build-test/race.mjs");
  const gemm = [
    { m: 256, k: 256, n: 1024, bias: true, library: "onednn", mkl_us: 1400, onednn_us: 1260, gelu: "tanh" },
    { m: 256, k: 1024, n: 256, bias: true, library: "onednn", mkl_us: 1350, onednn_us: 1215, gelu: null },
    { m: 256, k: 64, n: 64, bias: false, library: "mkl", mkl_us: 30, onednn_us: 45, gelu: null },
  ];
  const rows = raceRows({ inductor0: { ...REGIONS.inductor0, gemm }, inductor1: REGIONS.inductor1 });
  assert.equal(rows[0].gemm, "linear layers: 2 of 3 products on oneDNN (10% less time than MKL there), 1 on MKL; GELU fused into 1");
  assert.equal(rows[1].gemm, "");  // none chosen in this process: no line
  assert.equal(gemmLine([{ ...gemm[0], mkl_us: null, onednn_us: null, gelu: null }]), "linear layers: 1 of 1 product on oneDNN");
  assert.equal(gemmDetail(gemm).split("\n")[0], "256×256 @ 256×1024 + bias: oneDNN (MKL 1.400 ms, oneDNN 1.260 ms), GELU (tanh) fused");
  assert.equal(gemmDetail([{ ...gemm[2], mkl_us: null }]), "256×64 @ 64×64: MKL (MKL not timed here, oneDNN 0.045 ms)");
  const name = Object.keys(RECORD.regions)[0];
  const region = { ...RECORD.regions[name], race: REGIONS.inductor0.race };
  assert.deepEqual(checkPayload({ ...RECORD, regions: { ...RECORD.regions, [name]: { ...region, gemm } } }), []);
  const bad = checkPayload({ ...RECORD, regions: { ...RECORD.regions, [name]: { ...region, gemm: [{ ...gemm[0], library: "blas" }] } } });
  assert.equal(bad.length, 1);
  assert.match(bad[0].path, /gemm/);
});
