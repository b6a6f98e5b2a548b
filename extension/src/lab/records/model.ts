// The kernel's compile records as the sidebar lists them: newest first, filtered by name, in pages.
import { Signal, type ISignal } from "@lumino/signaling";
import type { Origin, RecordRow } from "../protocol";

export const PAGE = 50;

/** Rows newest first (by record number), those whose name contains `filter` (any case), page `page`. */
export function visibleRows(rows: RecordRow[], filter: string, page: number, size = PAGE): { rows: RecordRow[]; total: number; pages: number } {
  const f = filter.trim().toLowerCase();
  const all = rows.filter((r) => !f || r.name.toLowerCase().includes(f)).sort((a, b) => b.record - a.record);
  const pages = Math.max(1, Math.ceil(all.length / size));
  const p = Math.max(0, Math.min(page, pages - 1));
  return { rows: all.slice(p * size, (p + 1) * size), total: all.length, pages };
}

/** What made a record's graph, in a word or two for its row ("" for a whole function captured once):
 *  TorchDynamo compiled the function again, or the graph ends at a graph break, or resumes after one. */
export function originTag(o: Origin | null | undefined): string {
  if (!o) return "";
  const tags: string[] = [];
  if (o.recompiled) tags.push("compiled again");
  if (o.resumed && o.graph_break) tags.push("between graph breaks");
  else if (o.resumed) tags.push("after a graph break");
  else if (o.graph_break) tags.push("up to a graph break");
  return tags.join(", ");
}

/** A graph's calls run as TorchDynamo captured it, for its newest record's row ("" when none), and why. */
export function capturedTag(n: number | undefined): { text: string; title: string } {
  if (!n) return { text: "", title: "" };
  return {
    text: `${n} call${n === 1 ? "" : "s"} as captured`,
    title: "This graph's input sizes kept changing, so calls with sizes it has no program for ran the graph as " +
      "TorchDynamo captured it (eager PyTorch), not compiled. In grad mode a size that comes again compiles once " +
      "its calls have taken as long as a compile, while fewer than set_limits()['shapes'] are compiled. " +
      "thunderlab.set_limits(new_sizes=...) sets how many new sizes in a row compile at once.",
  };
}

export class RecordsModel {
  private _rows = new Map<number, RecordRow>();
  private _filter = "";
  private _page = 0;
  private _selected: number | null = null;
  private _changed = new Signal<this, void>(this);
  private _selectedChanged = new Signal<this, number | null>(this);

  get changed(): ISignal<this, void> { return this._changed; }
  get selectedChanged(): ISignal<this, number | null> { return this._selectedChanged; }
  get filter(): string { return this._filter; }
  get page(): number { return this._page; }
  get selected(): number | null { return this._selected; }
  get size(): number { return this._rows.size; }
  row(i: number): RecordRow | undefined { return this._rows.get(i); }
  view() { return visibleRows([...this._rows.values()], this._filter, this._page); }

  /** Replace every row (after listing the kernel's records); keeps the selection if it still exists. */
  reset(rows: RecordRow[]): void {
    this._rows = new Map(rows.map((r) => [r.record, r]));
    if (this._selected !== null && !this._rows.has(this._selected)) this.select(null);
    this._changed.emit();
  }

  /** A record the kernel just made: listed at the top. */
  add(row: RecordRow): void { this._rows.set(row.record, row); this._changed.emit(); }

  setFilter(text: string): void { this._filter = text; this._page = 0; this._changed.emit(); }
  setPage(p: number): void { this._page = Math.max(0, Math.min(p, this.view().pages - 1)); this._changed.emit(); }

  select(record: number | null): void {
    if (record === this._selected) return;
    this._selected = record;
    this._changed.emit();
    this._selectedChanged.emit(record);
  }
}
