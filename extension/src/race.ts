// The executor race per region, for every view: once a region's kernels compiled, its next calls took turns
// between torch and each fusion executor's kernel, and the fastest call was kept (torch included). The
// payload's regions[name].race, shaped for the step page's Timings pane, the HTML report and the sidebar's
// timings panel. Pure but for `raceView`, which draws with inline styles so every host shows it alike.
import { h } from "./dom";
import type { Gemm, Layouts, Race } from "./payload";

export type { Race } from "./payload";

export interface RaceLane { version: string; median_ms: number | null; min_ms: number | null; count: number; winner: boolean; frac: number }
export interface RaceRow { region: string; state: Race["state"]; winner: string | null; why: string; lanes: RaceLane[]; layouts: string; gemm: string; gemmDetail: string }
type RegionLike = { race?: Race | null; layouts?: Layouts | null; gemm?: Gemm[] | null };

/** A kernel compiled again for other input strides, in words ("" when it never was):
 *  "kernel compiled again for 1 more input layout; 3 calls ran torch meanwhile". */
export function layoutsLine(l: Layouts | null | undefined): string {
  if (!l || (!l.compiled && !l.compiling && !l.fallback_calls)) return "";
  const parts: string[] = [];
  if (l.compiled) parts.push(`kernel compiled again for ${l.compiled} more input layout${l.compiled === 1 ? "" : "s"}`);
  if (l.compiling) parts.push("one more compiling now");
  if (l.fallback_calls) parts.push(`${l.fallback_calls} call${l.fallback_calls === 1 ? "" : "s"} ran torch meanwhile (left out of the race)`);
  return parts.join("; ");
}

/** The library each of a kernel's linear layers runs on, in words ("" when none was chosen in this process):
 *  "linear layers: 3 of 4 products on oneDNN (12% less time than MKL there), 1 on MKL; GELU fused into 1". */
export function gemmLine(g: Gemm[] | null | undefined): string {
  if (!g || !g.length) return "";
  const dnn = g.filter((x) => x.library === "onednn");
  const timed = dnn.filter((x) => x.mkl_us != null && x.onednn_us != null);
  const mkl = timed.reduce((a, x) => a + (x.mkl_us as number), 0), one = timed.reduce((a, x) => a + (x.onednn_us as number), 0);
  let out = `linear layers: ${dnn.length} of ${g.length} product${g.length === 1 ? "" : "s"} on oneDNN`;
  if (timed.length && mkl > 0) out += ` (${Math.round(100 * (1 - one / mkl))}% less time than MKL there)`;
  if (g.length > dnn.length) out += `, ${g.length - dnn.length} on MKL`;
  const gelu = dnn.filter((x) => x.gelu).length;
  if (gelu) out += `; GELU fused into ${gelu}`;
  return out;
}

/** Each product on a line of its own: "256×256 @ 256×768 + bias: oneDNN 0.95 ms, MKL 1.01 ms, GELU (tanh) fused". */
export function gemmDetail(g: Gemm[] | null | undefined): string {
  const us = (v: number | null | undefined) => (v == null ? "not timed here" : `${(v / 1e3).toFixed(3)} ms`);
  return (g ?? []).map((x) => `${x.m}×${x.k} @ ${x.k}×${x.n}${x.bias ? " + bias" : ""}: ${x.library === "onednn" ? "oneDNN" : "MKL"}`
    + ` (MKL ${us(x.mkl_us)}, oneDNN ${us(x.onednn_us)})${x.gelu ? `, GELU (${x.gelu}) fused` : ""}`).join("\n");
}

/** One row per region that has a race, in region order; each version a lane, fastest first, its bar a fraction of the slowest. */
export function raceRows(regions: Record<string, RegionLike>): RaceRow[] {
  const rows: RaceRow[] = [];
  for (const [region, r] of Object.entries(regions)) {
    const race = r.race;
    if (!race) continue;
    const versions = race.versions.length ? race.versions : Object.keys(race.times);
    const lanes = versions.map((version) => {
      const t = race.times[version];
      return { version, median_ms: t ? t.median_s * 1e3 : null, min_ms: t ? t.min_s * 1e3 : null, count: t ? t.count : 0,
        winner: race.winner === version, frac: 0 };
    });
    const max = Math.max(1e-12, ...lanes.map((l) => l.min_ms ?? 0));
    for (const l of lanes) l.frac = l.min_ms === null ? 0 : l.min_ms / max;
    lanes.sort((a, b) => (a.min_ms ?? Infinity) - (b.min_ms ?? Infinity));
    rows.push({ region, state: race.state, winner: race.winner, why: race.why, lanes, layouts: layoutsLine(r.layouts),
      gemm: gemmLine(r.gemm), gemmDetail: gemmDetail(r.gemm) });
  }
  return rows;
}

/** How the races went, in one line: "2 regions raced: 1 kept its kernel, 1 back to torch; 1 still racing". */
export function raceSummary(rows: RaceRow[]): string {
  if (!rows.length) return "";
  const done = rows.filter((r) => r.state === "done");
  const torch = done.filter((r) => r.winner === "torch").length;
  const parts = [`${done.length} of ${rows.length} region${rows.length === 1 ? "" : "s"} raced`];
  if (done.length) parts.push(`${done.length - torch} kept a kernel, ${torch} back to torch`);
  const racing = rows.filter((r) => r.state === "racing").length, waiting = rows.filter((r) => r.state === "waiting").length;
  const paused = rows.filter((r) => r.state === "paused").length, off = rows.filter((r) => r.state === "off").length;
  if (racing) parts.push(`${racing} racing now`);
  if (paused) parts.push(`${paused} paused (not called lately)`);
  if (waiting) parts.push(`${waiting} waiting for their kernels`);
  if (off) parts.push(`${off} not raced`);
  return parts.join("; ");
}

const WIN = "var(--jp-success-color1, #4caf50)", LOSE = "var(--jp-layout-color3, #bdbdbd)";

/** The races as one block per region: the verdict in words, then a bar per version (the winner's marked); null when none raced. */
export function raceView(regions: Record<string, RegionLike>): HTMLElement | null {
  const rows = raceRows(regions);
  if (!rows.length) return null;
  const box = h("div", { class: "tl-race" }, h("div", { class: "tl-muted tl-race-summary" },
    `executor race: ${raceSummary(rows)} (each version by its fastest call; the fastest is kept)`));
  for (const r of rows) {
    const block = h("div", { class: `tl-race-region tl-race-${r.state}`, "data-region": r.region, style: "margin:4px 0 6px" },
      h("div", { class: "tl-race-why", style: "font-size:12px" }, h("b", {}, r.region), `: ${r.why}`));
    if (r.layouts) block.append(h("div", { class: "tl-muted tl-race-layouts", style: "font-size:11px" }, r.layouts));
    if (r.gemm) block.append(h("div", { class: "tl-muted tl-race-gemm", style: "font-size:11px", title: r.gemmDetail }, r.gemm));
    for (const l of r.lanes) {
      const label = l.median_ms === null ? `${l.version}: not timed yet`
        : `${l.version}${l.winner ? " ✓" : ""}: ${l.min_ms!.toFixed(3)} ms fastest, ${l.median_ms.toFixed(3)} median (${l.count} calls)`;
      block.append(h("div", { class: `tl-race-lane${l.winner ? " tl-race-winner" : ""}`, "data-version": l.version,
        style: "position:relative;height:16px;margin:2px 0;border-radius:2px;overflow:hidden;background:var(--jp-layout-color2,#f0f0f3)" },
        h("span", { style: `position:absolute;left:0;top:0;bottom:0;width:${Math.max(0.5, l.frac * 100).toFixed(1)}%;background:${l.winner ? WIN : LOSE}` }),
        h("span", { style: "position:relative;padding-left:4px;font-size:11px;line-height:16px;white-space:nowrap" }, label)));
    }
    box.append(block);
  }
  return box;
}
