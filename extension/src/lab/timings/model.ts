// Live timings of one record's fusion regions, as the kernel streams them while the program runs; the kernels of
// one profiled call; and the pure shaping of a comparison of two records (step times paired, call time in words).
import { Signal, type ISignal } from "@lumino/signaling";
import { kernelTable, OUTSIDE, type Kernels, type RegionKernels } from "../../kernels";
import { alignLines } from "../../textdiff";
import type { CompareStep, TimingsEvent } from "../protocol";

export interface TimingRow { region: string; executor: string; version: string; running: boolean; count: number; median_ms: number; min_ms: number }

/** One row per region and version that ran, in region order; counts summed over versions come first per region. */
export function timingRows(ev: TimingsEvent | null): TimingRow[] {
  if (!ev) return [];
  const rows: TimingRow[] = [];
  for (const [region, r] of Object.entries(ev.regions)) {
    for (const [version, t] of Object.entries(r.timings)) {
      rows.push({ region, executor: r.executor, version, running: version === r.version,
        count: t.count, median_ms: t.median_s * 1e3, min_ms: t.min_s * 1e3 });
    }
  }
  return rows;
}

export function totalCalls(ev: TimingsEvent | null): number {
  return timingRows(ev).reduce((n, r) => n + r.count, 0);
}

export interface RegionGroup { region: string; rows: TimingRow[]; kernels: RegionKernels | null }

/** The timed rows grouped by region, each with its profiled kernels; regions only profiled follow, the calls between regions last. */
export function regionGroups(rows: TimingRow[], kernels: Kernels | null, top = 8): RegionGroup[] {
  const byRegion = new Map(kernelTable(kernels, top).map((k) => [k.region, k]));
  const groups: RegionGroup[] = [];
  const at = new Map<string, RegionGroup>();
  for (const r of rows) {
    let g = at.get(r.region);
    if (!g) { g = { region: r.region, rows: [], kernels: byRegion.get(r.region) ?? null }; at.set(r.region, g); groups.push(g); }
    g.rows.push(r);
  }
  for (const [region, k] of byRegion) if (!at.has(region) && region !== OUTSIDE) groups.push({ region, rows: [], kernels: k });
  const outside = byRegion.get(OUTSIDE);
  if (outside) groups.push({ region: OUTSIDE, rows: [], kernels: outside });
  return groups;
}

export interface StepSide { index: number; spec: string; ms: number; shared: boolean }
export interface StepPair { a: StepSide | null; b: StepSide | null; a_frac: number; b_frac: number }

/**
 * The two pipelines' steps side by side, matched by pass spec (a pass one pipeline lacks gets a row of its
 * own); each bar's length is its time over the longest step of either.
 */
export function pairSteps(a: CompareStep[], b: CompareStep[]): StepPair[] {
  const max = Math.max(1e-9, ...a.map((s) => s.ms), ...b.map((s) => s.ms));
  const rows = alignLines(a.map((s) => s.spec), b.map((s) => s.spec));
  const out: StepPair[] = [];
  let i = 0, j = 0;
  for (const r of rows) {
    const sa = r.a !== null ? a[i++] : null, sb = r.b !== null ? b[j++] : null;
    if (r.kind === "change") {  // different passes at one place: two rows, so a bar never pairs with another pass
      out.push({ a: sa, b: null, a_frac: sa!.ms / max, b_frac: 0 }, { a: null, b: sb, a_frac: 0, b_frac: sb!.ms / max });
      continue;
    }
    out.push({ a: sa, b: sb, a_frac: sa ? sa.ms / max : 0, b_frac: sb ? sb.ms / max : 0 });
  }
  return out;
}

/** The call time of b against a in words: "#5 is 1.80x as fast as #3", or "#5 takes 1.25x as long as #3". */
export function speedWords(aSeconds: number, bSeconds: number, a = "a", b = "b"): string {
  const r = aSeconds / bSeconds;
  if (!Number.isFinite(r) || r <= 0) return `${b}: no time to compare`;
  const said = r >= 1 ? `${b} is ${r.toFixed(2)}x as fast as ${a}` : `${b} takes ${(1 / r).toFixed(2)}x as long as ${a}`;
  return Math.abs(r - 1) < 0.05 ? `${said}: about the same (within timing noise)` : said;
}

export class TimingsModel {
  private _latest: TimingsEvent | null = null;
  private _history: number[] = [];  // total calls at each update, for the sparkline
  private _profile: { record: number; kernels: Kernels | null; state: "idle" | "running" | "error"; error: string } | null = null;
  private _changed = new Signal<this, void>(this);

  get changed(): ISignal<this, void> { return this._changed; }
  get latest(): TimingsEvent | null { return this._latest; }
  get history(): readonly number[] { return this._history; }
  /** The profile of the record shown: its kernels, whether one is being taken, or why it failed. */
  profileOf(record: number | null): { kernels: Kernels | null; state: "idle" | "running" | "error"; error: string } {
    return this._profile && this._profile.record === record ? this._profile : { kernels: null, state: "idle", error: "" };
  }

  /** A new snapshot; one for another record starts a new history. */
  update(ev: TimingsEvent): void {
    if (!this._latest || this._latest.record !== ev.record) this._history = [];
    this._latest = ev;
    this._history.push(totalCalls(ev));
    if (this._history.length > 120) this._history.shift();
    this._changed.emit();
  }

  /** The profile's progress for `record`: started, its kernels, or an error in words. */
  setProfile(record: number, p: { kernels?: Kernels | null; state: "idle" | "running" | "error"; error?: string }): void {
    const kept = this._profile?.record === record ? this._profile.kernels : null;
    this._profile = { record, kernels: p.kernels !== undefined ? p.kernels : kept, state: p.state, error: p.error ?? "" };
    this._changed.emit();
  }

  clear(): void { this._latest = null; this._history = []; this._profile = null; this._changed.emit(); }
}
