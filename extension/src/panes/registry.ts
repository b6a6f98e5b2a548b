// What a pane of the step page is, and how a host draws one. The step page (a step's program, diff, graph,
// notes, timings) is written once, as the panes in this folder: the report, the notebook widget and the
// document viewer draw them through the record page (../record.ts), the sidebar through its step panel
// (../lab/step/panel.ts). Each host iterates PANES (./index.ts) for its tabs and calls renderPane. Adding a
// pane is one new file here, `export const <name>: Pane = { id, title, order, … }`: ./index.ts is generated
// from this folder by ../../panes.mjs (the npm scripts run it first), tabs sorted by `order`; no host changes.
//
// The layers of extension/src, bottom to top; a module imports only from its own layer or those below
// (test/layers.test.mjs fails on an import circle or an upward import):
//   1 bottom  payload.ts (the record's types, the schema check), dom.ts (h, ms), selection.ts, textdiff.ts:
//             import nothing of ours
//   2 leaves  calldiff.ts, kernels.ts, communication.ts, race.ts, stepinfo.ts, graph/*: one view each, built from the bottom
//   3 panes   panes/registry.ts (this), panes/<pane>.ts, panes/index.ts (the list, generated)
//   4 pages   record.ts (the record page: header, step table, the panes); lab/* (the sidebar, the
//             document viewer), which JupyterLab's bundler builds
//   5 entries report.ts, widget.ts, views.ts (the one bundle they share: thunderlab/inspect/static/views.js)
import type { GraphViewOptions } from "../graph/view";
import { h } from "../dom";
import type { Payload, Source, Step, Trace } from "../payload";
import type { SelectionModel } from "../selection";

export type Traces = Record<string, Trace>;

/** What a pane keeps across repaints of one host (the diff's chosen step, the graph's node to centre on). */
export interface PaneState { against?: number; focus?: string | null; [key: string]: unknown }

/** What the host gives a pane: the record, the trace chosen, the shared selection and the host's own ways. */
export interface PaneContext {
  payload: Payload;
  /** The name of the trace shown ("forward", "backward"); "" when the step has none. */
  trace: string;
  /** The call selected in every view of this host (program, diff, graph, notes). */
  selection: SelectionModel;
  /** Kept by the host across repaints; each pane uses its own keys. */
  state: PaneState;
  repaint(): void;
  /** Show another trace (the graph follows a node from forward to backward); the host repaints. */
  setTrace(name: string): void;
  /** A step's traces: null when it has none (it failed), undefined while they are not here. */
  tracesOf(step: number): Traces | null | undefined;
  /** Fetch a step's traces that are not here (the sidebar asks the kernel); the host repaints when they come. */
  load?(step: number): void;
  /** The host's options for the graph (the sidebar's settings). */
  graph?: Partial<GraphViewOptions>;
  /** Open a call's source line (the sidebar opens the notebook cell or file); without it the place is text. */
  openSource?(s: Source): void;
  /** The host's own program view (the sidebar's read-only JupyterLab editor) instead of the shared one. */
  program?(t: Trace): Node;
}

export interface Pane {
  /** Stable key. */
  id: string;
  /** The tab's words (hosts also use it as the tab's data attribute and remember it). */
  title: string;
  /** The tab's position: tabs run by ascending order (ties by file name). Steps of 10 leave room between. */
  order: number;
  /** Whether the pane draws the chosen trace: the host's page says "loading…" or "(no traces)" until there is one. */
  needsTrace: boolean;
  /** ``step`` comes with its traces (when here); for a pane that needs one, ``step.traces[ctx.trace]`` is there. */
  render(step: Step, ctx: PaneContext): Node;
  /** The pane's styles, scoped under .thunderlab. */
  css?: string;
}

/** The pane for ``step`` as the host appends it: the trace's one-line stats above the panes that draw a trace. */
export function renderPane(pane: Pane, st: Step, ctx: PaneContext): Node[] {
  const traces = ctx.tracesOf(st.index);
  const step = { ...st, traces: traces ?? null };
  if (!pane.needsTrace) return [pane.render(step, ctx)];
  if (traces === undefined && !st.error) return [h("div", { class: "tl-loading tl-muted" }, "loading…")];
  if (!traces) return [h("div", { class: "tl-muted" }, st.error ? "(no traces: the step failed)" : "(this step has no program)")];
  const t = traces[ctx.trace];
  if (!t) return [h("div", { class: "tl-muted" }, "(no traces)")];
  return [
    h("div", { class: "tl-muted tl-stats" }, `${ctx.trace}: ${t.stats.symbols} symbols, ${t.stats.regions} regions · ` +
      Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")),
    pane.render(step, ctx),
  ];
}
