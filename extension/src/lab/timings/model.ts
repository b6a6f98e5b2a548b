// Live timings of one record's fusion regions, as the kernel streams them while the program runs.
import { Signal, type ISignal } from "@lumino/signaling";
import type { TimingsEvent } from "../protocol";

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

export class TimingsModel {
  private _latest: TimingsEvent | null = null;
  private _history: number[] = [];  // total calls at each update, for the sparkline
  private _changed = new Signal<this, void>(this);

  get changed(): ISignal<this, void> { return this._changed; }
  get latest(): TimingsEvent | null { return this._latest; }
  get history(): readonly number[] { return this._history; }

  /** A new snapshot; one for another record starts a new history. */
  update(ev: TimingsEvent): void {
    if (!this._latest || this._latest.record !== ev.record) this._history = [];
    this._latest = ev;
    this._history.push(totalCalls(ev));
    if (this._history.length > 120) this._history.shift();
    this._changed.emit();
  }

  clear(): void { this._latest = null; this._history = []; this._changed.emit(); }
}
