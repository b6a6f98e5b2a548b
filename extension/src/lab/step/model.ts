// The record and step the sidebar shows: the record's summary, the selected step and each step's traces
// (fetched from the kernel when first shown). Both are checked against the payload's schema as they arrive:
// what does not follow it is kept as problems for the panel to show, never handed to a view.
import { Signal, type ISignal } from "@lumino/signaling";
import { checkPayload, checkTraces, type Payload, type Problem, type Trace } from "../../payload";
import type { KernelLink } from "../link";
import type { SidebarMemory } from "../memory";

export type Traces = Record<string, Trace> | null;

export class StepModel {
  private _record: number | null = null;
  private _payload: Payload | null = null;
  private _step = 0;
  private _trace = "forward";
  private _traces = new Map<number, Traces>();
  private _error = "";
  private _problems: Problem[] = [];
  private _traceProblems = new Map<number, Problem[]>();
  private _changed = new Signal<this, void>(this);

  /** `memory` keeps, per notebook, the record and step shown (JupyterLab's state database). */
  constructor(readonly link: KernelLink, readonly memory: SidebarMemory | null = null) {}

  get changed(): ISignal<this, void> { return this._changed; }
  get record(): number | null { return this._record; }
  get payload(): Payload | null { return this._payload; }
  get step(): number { return this._step; }
  get trace(): string { return this._trace; }
  get error(): string { return this._error; }
  /** How the record's summary (or else the shown step's traces) breaks the schema; empty when it follows it. */
  get problems(): Problem[] { return this._problems.length ? this._problems : this._traceProblems.get(this._step) ?? []; }
  traces(step = this._step): Traces | undefined { return this._traces.get(step); }

  /** Show record `record` (null: none) at its last step that has a program. */
  async open(record: number | null): Promise<void> {
    this._record = record;
    this._payload = null;
    this._traces.clear();
    this._traceProblems.clear();
    this._error = "";
    this._problems = [];
    this._changed.emit();
    if (record === null) return;
    try {
      const r = await this.link.request("record.summary", { record });
      if (this._record !== record) return;
      this._problems = checkPayload(r.payload);
      if (this._problems.length) { this._changed.emit(); return; }
      this._payload = r.payload;
      const ok = r.payload.steps.filter((s) => !s.error).map((s) => s.index);
      const kept = this.memory?.get(this._path());
      if (kept?.trace) this._trace = kept.trace;
      await this.select(kept?.record === record && kept.step !== undefined ? kept.step : ok.length ? ok[ok.length - 1] : 0);
    } catch (e) { this._fail(e); }
  }

  /** Select step `i` (clamped), loading its traces. */
  async select(i: number): Promise<void> {
    const p = this._payload;
    if (!p) return;
    this._step = Math.max(0, Math.min(p.steps.length - 1, i));
    this.memory?.set(this._path(), { record: this._record ?? undefined, step: this._step });
    this._changed.emit();
    await this.load(this._step);
  }

  move(delta: number): Promise<void> { return this.select(this._step + delta); }

  setTrace(name: string): void { this._trace = name; this.memory?.set(this._path(), { trace: name }); this._changed.emit(); }

  /** Repaint the views (after a settings change). */
  refresh(): void { this._changed.emit(); }

  /** The traces of step i, from the kernel the first time. */
  async load(i: number): Promise<Traces> {
    if (this._traces.has(i)) return this._traces.get(i)!;
    const record = this._record!;
    try {
      const r = await this.link.request("step.traces", { record, step: i });
      if (this._record !== record) return null;
      const problems = checkTraces(r.traces, i);
      if (problems.length) this._traceProblems.set(i, problems);
      this._traces.set(i, problems.length ? null : r.traces);
      this._changed.emit();
      return this._traces.get(i)!;
    } catch (e) { this._fail(e); return null; }
  }

  /** Forget the steps remembered for the followed notebook (its kernel restarted). */
  forget(): void { this.memory?.forget(this._path()); }

  private _path(): string | undefined { return this.link.session?.path; }

  private _fail(e: unknown): void { this._error = e instanceof Error ? e.message : String(e); this._changed.emit(); }
}
