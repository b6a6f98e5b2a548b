// Communication beside compute: the collectives a distributed program exchanged, as timed with timing=True (the
// payload's "communication"), shaped for the sidebar's timings panel and the step page's Timings pane. Pure but
// for `communicationView`; the colour is the graph's, so a collective reads the same in the graph and the timings.
import { h } from "./dom";
import type { Communication, Region } from "./payload";

export type { Communication, Exchange } from "./payload";

// collectives and their waits: their own colour whatever runs them, so communication stands out among compute
export const COMM_COLOR = "#f4a3c0";

export interface CommRow {
  collective: string; count: number; median_ms: number; min_ms: number; total_ms: number;
  blocked_median_ms: number; blocked_total_ms: number;
}

/** One row per collective that was timed, the costliest (total time in flight) first. */
export function communicationRows(c: Communication | null | undefined): CommRow[] {
  return Object.entries(c ?? {}).map(([collective, t]) => ({
    collective, count: t.count, median_ms: t.median_s * 1e3, min_ms: t.min_s * 1e3, total_ms: t.total_s * 1e3,
    blocked_median_ms: t.blocked_median_s * 1e3, blocked_total_ms: t.blocked_total_s * 1e3,
  })).sort((a, b) => b.total_ms - a.total_ms || a.collective.localeCompare(b.collective));
}

/**
 * Compute and communication per program call. `calls`: how often the program ran, read from its regions (the
 * most-called region's calls: each region runs once a call); compute: the regions' medians (the version
 * running) summed; communication: the exchanges' time in flight and blocked in their waits, over the calls.
 * Null when nothing was timed; compute and calls are null when no region was (communication is then a total).
 */
export interface Balance { calls: number | null; compute_ms: number | null; in_flight_ms: number; blocked_ms: number; exchanges: number }

export function perCall(regions: Record<string, Pick<Region, "version" | "timings">>, c: Communication | null | undefined): Balance | null {
  const rows = communicationRows(c);
  if (!rows.length) return null;
  let calls = 0, compute = 0, timed = false;
  for (const r of Object.values(regions)) {
    const ts = Object.values(r.timings);
    if (!ts.length) continue;
    timed = true;
    calls = Math.max(calls, ts.reduce((n, t) => n + t.count, 0));
    const running = r.timings[r.version] ?? ts[ts.length - 1];
    compute += running.median_s * 1e3;
  }
  const over = timed && calls > 0 ? calls : 1;
  const sum = (f: (r: CommRow) => number) => rows.reduce((n, r) => n + f(r), 0) / over;
  return { calls: timed ? calls : null, compute_ms: timed ? compute : null, in_flight_ms: sum((r) => r.total_ms),
    blocked_ms: sum((r) => r.blocked_total_ms), exchanges: sum((r) => r.count) };
}

const f3 = (v: number) => v.toFixed(3);

/** A bar `frac` of its track, in `color`, labelled (styled inline: the report, the widget and the sidebar alike). */
function bar(frac: number, color: string, label: string, cls: string): HTMLElement {
  return h("div", { class: `tl-comm-bar ${cls}`, style: "position:relative;height:16px;margin:2px 0;border-radius:2px;overflow:hidden;background:var(--jp-layout-color2,#f0f0f3)" },
    h("span", { class: "tl-comm-fill", style: `position:absolute;left:0;top:0;bottom:0;width:${Math.max(0.5, Math.min(100, frac * 100)).toFixed(1)}%;background:${color}` }),
    h("span", { class: "tl-comm-label", style: "position:relative;padding-left:4px;font-size:11px;line-height:16px;white-space:nowrap" }, label));
}

/** Compute against communication per call, as bars, and one row per collective; empty when nothing was exchanged. */
export function communicationView(regions: Record<string, Pick<Region, "version" | "timings">>, c: Communication | null | undefined): HTMLElement | null {
  const b = perCall(regions, c);
  if (!b) return null;
  const box = h("div", { class: "tl-communication" });
  const per = b.calls !== null ? `per call (${b.calls} calls)` : "in all (no region timed: totals)";
  box.append(h("div", { class: "tl-muted" }, `compute and communication ${per}: the swatch is the graph's communication colour`));
  const max = Math.max(1e-9, b.compute_ms ?? 0, b.in_flight_ms);
  if (b.compute_ms !== null) box.append(bar(b.compute_ms / max, "var(--jp-brand-color2, #90caf9)", `compute (regions): ${f3(b.compute_ms)} ms`, "tl-comm-compute"));
  box.append(bar(b.in_flight_ms / max, COMM_COLOR, `communication: ${f3(b.in_flight_ms)} ms in flight, ${f3(b.blocked_ms)} ms blocked`, "tl-comm-total"));
  const table = h("table", { class: "tl-comm-times", style: "border-collapse:collapse;font-size:12px" }, h("thead", {}, h("tr", {},
    ...["collective", "exchanges", "median ms", "min ms", "blocked median ms"].map((t, i) => h("th", { class: i ? "tl-num" : "" }, t)))));
  const body = h("tbody");
  for (const r of communicationRows(c)) {
    body.append(h("tr", { "data-collective": r.collective },
      h("td", { style: "white-space:nowrap" }, h("span", { class: "tl-swatch", style: `display:inline-block;width:10px;height:10px;margin-right:4px;background:${COMM_COLOR}` }), r.collective),
      h("td", { class: "tl-num" }, String(r.count)), h("td", { class: "tl-num" }, f3(r.median_ms)),
      h("td", { class: "tl-num" }, f3(r.min_ms)), h("td", { class: "tl-num" }, f3(r.blocked_median_ms))));
  }
  table.append(body);
  box.append(table, h("div", { class: "tl-muted" }, "in flight: from the collective's issue to its wait returning (computation overlaps it); blocked: the time the program stood in the wait"));
  return box;
}
