// The pipeline being edited: passes in order, each enabled or not, with options; every edit can be undone.
// The text form is the one thunderlab's parser reads ("dce,-cse,claim{executors=torch},del"); whether it
// is valid is the kernel's parser's answer (checked as the user edits), never guessed here.
import { Signal, type ISignal } from "@lumino/signaling";

export interface PassItem { name: string; options: [string, string][]; enabled: boolean }

/** Split a pipeline string into items; a fragment that does not read as name{k=v,...} stays as its text. */
export function parsePipeline(text: string): PassItem[] {
  const items: PassItem[] = [];
  let depth = 0, start = 0;
  const parts: string[] = [];
  for (let i = 0; i <= text.length; i++) {
    const c = text[i];
    if (c === "{") depth++;
    else if (c === "}") depth = Math.max(0, depth - 1);
    else if ((c === "," && depth === 0) || i === text.length) { parts.push(text.slice(start, i)); start = i + 1; }
  }
  for (const raw of parts) {
    const part = raw.trim();
    if (!part) continue;
    const enabled = !part.startsWith("-");
    const body = enabled ? part : part.slice(1).trim();
    const brace = body.indexOf("{");
    const name = (brace < 0 ? body : body.slice(0, brace)).trim();
    const options: [string, string][] = [];
    if (brace >= 0) {
      for (const kv of body.slice(brace + 1).replace(/\}\s*$/, "").split(",")) {
        if (!kv.trim()) continue;
        const eq = kv.indexOf("=");
        options.push(eq < 0 ? [kv.trim(), ""] : [kv.slice(0, eq).trim(), kv.slice(eq + 1).trim()]);
      }
    }
    items.push({ name, options, enabled });
  }
  return items;
}

export function printItem(p: PassItem): string {
  const opts = p.options.length ? `{${p.options.map(([k, v]) => `${k}=${v}`).join(",")}}` : "";
  return `${p.enabled ? "" : "-"}${p.name}${opts}`;
}

export function printPipeline(items: PassItem[]): string {
  return items.map(printItem).join(",");
}

/** Move the item at `from` so that it ends up at index `to`. */
export function moved<T>(list: T[], from: number, to: number): T[] {
  const out = list.slice();
  if (from < 0 || from >= out.length) return out;
  const [x] = out.splice(from, 1);
  out.splice(Math.max(0, Math.min(out.length, to)), 0, x);
  return out;
}

/** The record step that pass `i` of the edited pipeline ran as, if the edit has not changed it or anything before it. */
export function stepOf(items: readonly PassItem[], i: number, steps: readonly { spec: string }[]): number | null {
  if (!items[i]?.enabled) return null;
  let k = 0;
  for (let j = 0; j <= i; j++) {
    if (!items[j].enabled) continue;
    k++;
    if (steps[k]?.spec !== printItem({ ...items[j], enabled: true })) return null;
  }
  return k;
}

export type Check = { state: "unchecked" } | { state: "checking" } | { state: "ok" } | { state: "invalid"; error: string };

export class PipelineModel {
  private _items: PassItem[] = [];
  private _undo: PassItem[][] = [];
  private _base = "";
  private _check: Check = { state: "unchecked" };
  private _changed = new Signal<this, void>(this);

  /** The pipeline or its check changed. */
  get changed(): ISignal<this, void> { return this._changed; }
  get items(): readonly PassItem[] { return this._items; }
  get text(): string { return printPipeline(this._items); }
  /** The pipeline of the record it was loaded from. */
  get base(): string { return this._base; }
  get edited(): boolean { return this.text !== this._base; }
  get canUndo(): boolean { return this._undo.length > 0; }
  get check(): Check { return this._check; }

  /** Start over from a record's pipeline (forgets the undo history). */
  load(pipeline: string): void {
    this._items = parsePipeline(pipeline);
    this._base = printPipeline(this._items);
    this._undo = [];
    this._check = { state: "ok" };
    this._changed.emit();
  }

  setCheck(check: Check): void { this._check = check; this._changed.emit(); }

  move(from: number, to: number): void { this._edit(moved(this._items, from, to)); }
  toggle(i: number): void { this._edit(this._items.map((p, k) => (k === i ? { ...p, enabled: !p.enabled } : p))); }
  remove(i: number): void { this._edit(this._items.filter((_, k) => k !== i)); }
  insert(name: string, at = this._items.length): void {
    const next = this._items.slice();
    next.splice(at, 0, { name, options: [], enabled: true });
    this._edit(next);
  }
  /** Set (or, with an empty value, drop) one option of pass i. */
  setOption(i: number, key: string, value: string): void {
    this._edit(this._items.map((p, k) => {
      if (k !== i) return p;
      const rest = p.options.filter(([o]) => o !== key);
      const at = p.options.findIndex(([o]) => o === key);
      if (!value) return { ...p, options: rest };
      const options = p.options.slice();
      if (at >= 0) options[at] = [key, value]; else options.push([key, value]);
      return { ...p, options };
    }));
  }
  /** Replace the whole pipeline with typed text. */
  setText(text: string): void { this._edit(parsePipeline(text)); }

  undo(): void {
    const prev = this._undo.pop();
    if (!prev) return;
    this._items = prev;
    this._check = { state: "unchecked" };
    this._changed.emit();
  }

  private _edit(next: PassItem[]): void {
    if (printPipeline(next) === this.text) return;
    this._undo.push(this._items);
    this._items = next;
    this._check = { state: "unchecked" };
    this._changed.emit();
  }
}
