// The kernels one profiled call ran (thunderlab.profile, or the sidebar's "Profile one call"), per fusion region:
// the costliest first, names shortened with the full name kept for a title. Shared by every view.
import type { KernelRow, Kernels } from "./payload";
import { h } from "./dom";

export type { KernelRow, Kernels } from "./payload";

export interface ShownKernel { name: string; short: string; count: number; cpu_us: number; device_us: number }
export interface RegionKernels {
  region: string; cpu_us: number; device_us: number; kernels: ShownKernel[];
  /** kernels left out after the top ones, and their CPU and device time */
  hidden: number; hidden_cpu_us: number; hidden_device_us: number;
}

export const OUTSIDE = "(outside regions)";

/** Text with every balanced `open…close` group (nested ones included) replaced by `with`. */
function collapse(s: string, open: string, close: string, by: string): string {
  let out = "", depth = 0;
  for (const c of s) {
    if (c === open) { if (depth++ === 0) out += by; continue; }
    if (c === close && depth > 0) { depth--; continue; }
    if (depth === 0) out += c;
  }
  return out;
}

/**
 * A kernel's name short enough for a table cell: Inductor's graph prefix, C++ templates, argument lists and
 * namespaces dropped (aten:: kept: it says the op ran eagerly), then cut to `max` characters.
 */
export function shortKernelName(name: string, max = 44): string {
  let s = name.trim();
  const marker = /^##\s*(.*?)\s*##$/.exec(s);  // a profiler range such as "## Call CompiledFxGraph <hash> ##"
  if (marker) s = /^Call CompiledFxGraph\b/.test(marker[1]) ? "Inductor graph call" : marker[1];
  s = s.replace(/^void\s+/, "").replace(/^graph_\d+_/, "");
  s = collapse(collapse(s, "<", ">", ""), "(", ")", "").trim();
  if (!s.startsWith("aten::")) s = s.split("::").filter(Boolean).pop() ?? s;
  if (!s) s = name.trim();
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
}

const cost = (k: KernelRow) => k.device_us || k.self_cpu_us;

/** Per region: its `top` costliest kernels and what the rest add up to; regions costliest first, the calls between regions last. */
export function kernelTable(kernels: Kernels | null | undefined, top = 8): RegionKernels[] {
  if (!kernels) return [];
  const out: RegionKernels[] = [];
  for (const [region, rows] of Object.entries(kernels)) {
    const sorted = [...rows].sort((x, y) => cost(y) - cost(x));
    const shown = sorted.slice(0, top), rest = sorted.slice(top);
    const sum = (rs: KernelRow[], f: (k: KernelRow) => number) => rs.reduce((n, k) => n + f(k), 0);
    out.push({
      region, cpu_us: sum(rows, (k) => k.self_cpu_us), device_us: sum(rows, (k) => k.device_us),
      kernels: shown.map((k) => ({ name: k.name, short: shortKernelName(k.name), count: k.count, cpu_us: k.self_cpu_us, device_us: k.device_us })),
      hidden: rest.length, hidden_cpu_us: sum(rest, (k) => k.self_cpu_us), hidden_device_us: sum(rest, (k) => k.device_us),
    });
  }
  const rank = (r: RegionKernels) => (r.region === OUTSIDE ? 1 : 0);
  return out.sort((x, y) => rank(x) - rank(y) || (y.device_us || y.cpu_us) - (x.device_us || x.cpu_us));
}

/** Microseconds as a table shows them: 1 decimal under 100 µs, whole above. */
export const us = (v: number) => (v < 100 ? v.toFixed(1) : Math.round(v).toLocaleString("en-US"));

/** Whether any kernel ran on a device (a GPU): the device column is shown only then. */
export function hasDevice(regions: RegionKernels[]): boolean {
  return regions.some((r) => r.device_us > 0);
}

/** The rows of one region's kernels (for a table with `device` columns or not). */
export function kernelRows(r: RegionKernels, device: boolean): HTMLElement[] {
  const rows = r.kernels.map((k) => h("tr", { class: "tl-kernel", "data-kernel": k.name },
    h("td", { class: "tl-kernel-name", title: k.name }, k.short),
    h("td", { class: "tl-num" }, String(k.count)), h("td", { class: "tl-num" }, us(k.cpu_us)),
    device ? h("td", { class: "tl-num" }, k.device_us > 0 ? us(k.device_us) : "–") : null));
  if (r.hidden) {
    rows.push(h("tr", { class: "tl-kernel tl-muted" }, h("td", {}, `… ${r.hidden} more`), h("td", {}),
      h("td", { class: "tl-num" }, us(r.hidden_cpu_us)), device ? h("td", { class: "tl-num" }, us(r.hidden_device_us)) : null));
  }
  return rows;
}

/** The kernel table: per region a heading row with its totals, then its top kernels. */
export function kernelsView(kernels: Kernels | null | undefined, top = 8): HTMLElement {
  const regions = kernelTable(kernels, top);
  if (!regions.length) return h("div", { class: "tl-muted" }, "(no kernels recorded)");
  const device = hasDevice(regions);
  const heads = ["kernel", "calls", "CPU µs", ...(device ? ["device µs"] : [])];
  const table = h("table", { class: "tl-kernels" }, h("thead", {}, h("tr", {}, ...heads.map((t, i) => h("th", { class: i ? "tl-num" : "" }, t)))));
  for (const r of regions) {
    const body = h("tbody", { "data-region": r.region });
    body.append(h("tr", { class: "tl-kernel-region" }, h("th", {}, r.region), h("th", {}),
      h("th", { class: "tl-num" }, us(r.cpu_us)), device ? h("th", { class: "tl-num" }, us(r.device_us)) : null));
    body.append(...kernelRows(r, device));
    table.append(body);
  }
  return h("div", { class: "tl-kernels-box" },
    h("div", { class: "tl-muted" }, `kernels of one profiled call, by fusion region (top ${top} each; hover a name for all of it). ` +
      "CPU µs is time spent in the kernel itself" + (device ? "; device µs, on the GPU." : ".")),
    h("div", { class: "tl-kernels-wrap" }, table));
}

export const KERNEL_CSS = `
.thunderlab .tl-kernels-wrap{overflow-x:auto;max-width:100%}
.thunderlab .tl-kernels{border-collapse:collapse;width:100%;font-size:12px}
.thunderlab .tl-kernels td,.thunderlab .tl-kernels th{padding:1px 6px}
.thunderlab .tl-kernel-name{font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px;overflow-wrap:anywhere}
.thunderlab .tl-kernel td:first-child{padding-left:14px}
.thunderlab .tl-kernel-region th{text-align:left;font-weight:600;background:var(--jp-layout-color2,#f4f4f6)}
.thunderlab .tl-kernel-region th.tl-num{text-align:right}
`;
