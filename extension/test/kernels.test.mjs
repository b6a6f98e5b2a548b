// The kernel table's shaping and the comparison's pure logic (src/kernels.ts, src/lab/timings/model.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { kernelTable, shortKernelName, hasDevice, OUTSIDE } from "../build-test/kernels.mjs";
import { pairSteps, regionGroups, speedWords } from "../build-test/lab.mjs";

const k = (name, self_cpu_us, device_us = 0, count = 1) => ({ name, count, self_cpu_us, device_us });

test("kernel names shorten to what a table cell can hold; the full name stays with the caller", () => {
  assert.equal(shortKernelName("aten::addmm"), "aten::addmm");
  assert.equal(shortKernelName("graph_0_cpp_fused_add_cos_mul_sin_sum_0"), "cpp_fused_add_cos_mul_sin_sum_0");
  assert.equal(shortKernelName("## Call CompiledFxGraph f6hser634x6qdpxazsw52zhfuejdnkyvym7dmgqyq7yzj3fr7uaq ##"), "Inductor graph call");
  assert.equal(shortKernelName("## Pregraph bytecode ##"), "Pregraph bytecode");
  const cuda = "void at::native::vectorized_elementwise_kernel<4, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}, at::detail::Array<char*, 2> >(int, at::native::sin_kernel_cuda(at::TensorIteratorBase&)::{lambda()#1}, at::detail::Array<char*, 2>)";
  assert.equal(shortKernelName(cuda), "vectorized_elementwise_kernel");
  assert.equal(shortKernelName("triton_poi_fused_add_mul_0"), "triton_poi_fused_add_mul_0");
  const long = "cpp_fused_" + "add_".repeat(30) + "0";
  assert.equal(shortKernelName(long).length, 44);
  assert.ok(shortKernelName(long).endsWith("…"));
  assert.equal(shortKernelName("()"), "()", "a name that shortens to nothing stays as it was");
});

test("kernelTable: top kernels per region by cost, the rest summed, regions costliest first and the calls between them last", () => {
  const t = kernelTable({
    [OUTSIDE]: [k("aten::mm", 900)],
    small: [k("aten::relu", 5), k("aten::mul", 7)],
    big: [k("a", 1), k("b", 50), k("c", 20), k("d", 30)],
  }, 2);
  assert.deepEqual(t.map((r) => r.region), ["big", "small", OUTSIDE]);
  const big = t[0];
  assert.deepEqual(big.kernels.map((x) => x.name), ["b", "d"]);
  assert.equal(big.cpu_us, 101);
  assert.deepEqual([big.hidden, big.hidden_cpu_us], [2, 21]);
  assert.deepEqual(t[1].kernels.map((x) => x.name), ["aten::mul", "aten::relu"]);
  assert.equal(hasDevice(t), false);
  // on a GPU the device time orders them, and the device column appears
  const g = kernelTable({ r: [k("cpu_heavy", 100, 1), k("gpu_heavy", 5, 80)] });
  assert.deepEqual(g[0].kernels.map((x) => x.name), ["gpu_heavy", "cpu_heavy"]);
  assert.equal(hasDevice(g), true);
  assert.deepEqual(kernelTable(null), []);
});

test("regionGroups: timed rows grouped by region with their kernels; profiled-only regions follow, the calls between regions last", () => {
  const rows = [
    { region: "r0", executor: "inductor", version: "torch", running: false, count: 1, median_ms: 1, min_ms: 1 },
    { region: "r0", executor: "inductor", version: "inductor", running: true, count: 9, median_ms: 0.2, min_ms: 0.1 },
    { region: "r1", executor: "inductor", version: "inductor", running: true, count: 10, median_ms: 0.5, min_ms: 0.4 },
  ];
  const g = regionGroups(rows, { [OUTSIDE]: [k("aten::mm", 3)], r1: [k("cpp_fused_x", 4)], r2: [k("cpp_fused_y", 2)] });
  assert.deepEqual(g.map((x) => [x.region, x.rows.length, x.kernels?.kernels.map((y) => y.name) ?? null]),
    [["r0", 2, null], ["r1", 1, ["cpp_fused_x"]], ["r2", 0, ["cpp_fused_y"]], [OUTSIDE, 0, ["aten::mm"]]]);
  assert.deepEqual(regionGroups([], null), []);
});

test("pairSteps matches the two pipelines' passes by spec; a pass only one has gets its own row", () => {
  const st = (index, spec, ms, shared = false) => ({ index, spec, ms, shared });
  const a = [st(0, "capture", 2), st(1, "dce", 1), st(2, "cse", 4), st(3, "claim", 2), st(4, "fuse", 1)];
  const b = [st(0, "capture", 2, true), st(1, "dce", 1, true), st(2, "claim", 3), st(3, "fuse", 8)];
  const p = pairSteps(a, b);
  assert.deepEqual(p.map((r) => [r.a?.spec ?? null, r.b?.spec ?? null]),
    [["capture", "capture"], ["dce", "dce"], ["cse", null], ["claim", "claim"], ["fuse", "fuse"]]);
  assert.equal(p[4].b_frac, 1, "the longest step of either fills its bar");
  assert.equal(p[2].a_frac, 0.5);
  assert.ok(p[0].b.shared && !p[3].b.shared);
  // different passes at one place never share a row
  const q = pairSteps([st(0, "capture", 1), st(1, "cse", 1)], [st(0, "capture", 1), st(1, "remat", 1)]);
  assert.deepEqual(q.map((r) => [r.a?.spec ?? null, r.b?.spec ?? null]), [["capture", "capture"], ["cse", null], [null, "remat"]]);
});

test("speedWords says the call time ratio in words, either way", () => {
  assert.equal(speedWords(1.8e-3, 1e-3, "#3", "#5"), "#5 is 1.80x as fast as #3");
  assert.equal(speedWords(1e-3, 1.25e-3, "#3", "#5"), "#5 takes 1.25x as long as #3");
  assert.equal(speedWords(1e-3, 1.01e-3), "b takes 1.01x as long as a: about the same (within timing noise)");
  assert.match(speedWords(1e-3, 0), /no time/);
});
