// What the sidebar showed for each notebook (record, step, trace, view), kept in JupyterLab's state
// database so that switching notebooks, or reloading the page, brings each one back as it was left.
import type { ReadonlyPartialJSONObject } from "@lumino/coreutils";
import { Signal, type ISignal } from "@lumino/signaling";

export interface NotebookState { record?: number; step?: number; trace?: string; view?: string }

/** The part of IStateDB the memory uses (a plain object in the node tests). */
export interface StateStore {
  fetch(id: string): Promise<unknown>;
  save(id: string, value: ReadonlyPartialJSONObject): Promise<void>;
}

export const STATE_ID = "thunderlab:sidebar-memory";
const MAX_NOTEBOOKS = 100;  // the oldest are forgotten first

/** `state` with `patch` applied; a new record forgets the old record's step. */
export function merged(state: NotebookState, patch: NotebookState): NotebookState {
  const out: NotebookState = { ...state, ...patch };
  if (patch.record !== undefined && patch.record !== state.record && patch.step === undefined) delete out.step;
  for (const k of Object.keys(out) as (keyof NotebookState)[]) if (out[k] === undefined) delete out[k];
  return out;
}

export class SidebarMemory {
  private _all = new Map<string, NotebookState>();
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _loaded = new Signal<this, void>(this);
  readonly ready: Promise<void>;

  constructor(private store: StateStore | null, private delay = 300) {
    this.ready = store
      ? store.fetch(STATE_ID).then((v) => {
        const saved = (v ?? {}) as Record<string, NotebookState>;
        for (const [path, s] of Object.entries(saved)) if (!this._all.has(path)) this._all.set(path, s);
        this._loaded.emit();
      }).catch((e) => console.warn("thunderlab: sidebar state not restored:", e))
      : Promise.resolve();
  }

  /** The saved state came back from the database. */
  get loaded(): ISignal<this, void> { return this._loaded; }

  get(path: string | undefined): NotebookState { return (path && this._all.get(path)) || {}; }

  set(path: string | undefined, patch: NotebookState): void {
    if (!path) return;
    const next = merged(this.get(path), patch);
    this._all.delete(path);  // most recent last
    this._all.set(path, next);
    while (this._all.size > MAX_NOTEBOOKS) this._all.delete(this._all.keys().next().value!);
    this._save();
  }

  forget(path: string | undefined): void {
    if (path && this._all.delete(path)) this._save();
  }

  /** Write now (the tests, and before the page goes). */
  flush(): Promise<void> {
    if (this._timer) { clearTimeout(this._timer); this._timer = null; }
    return this.store ? this.store.save(STATE_ID, Object.fromEntries(this._all) as ReadonlyPartialJSONObject) : Promise.resolve();
  }

  private _save(): void {
    if (!this.store || this._timer) return;
    this._timer = setTimeout(() => { this._timer = null; void this.flush(); }, this.delay);
  }
}
