// The Graph pane: the trace's dataflow graph; a node links to its other-trace twin (forward <-> backward).
import { graphView } from "../graph/view";
import type { Payload } from "../payload";
import type { Pane } from "./registry";

/** Per call id: the executors that declined it and why, from the latest claim step up to ``step``. */
export function declinesAt(p: Payload, step: number): Record<string, [string, string][]> {
  for (let i = Math.min(step, p.steps.length - 1); i >= 0; i--) {
    const notes = p.steps[i].notes as { declines?: Record<string, [string, string][]> } | null;
    if (notes && notes.declines) return notes.declines;
  }
  return {};
}

export const graphPane: Pane = {
  id: "graph",
  title: "Graph",
  needsTrace: true,
  render(step, ctx) {
    const traces = step.traces!, t = traces[ctx.trace];
    const graphs = Object.fromEntries(Object.entries(traces).map(([k, v]) => [k, v.graph]));
    const focus = ctx.state.focus;  // a node followed from the other trace: centred once
    ctx.state.focus = null;
    return graphView(t.graph, t.changes, { ...ctx.graph, trace: ctx.trace, traces: graphs, focus, declines: declinesAt(ctx.payload, step.index),
      onJump: (tr, id) => { ctx.state.focus = id; ctx.setTrace(tr); } });
  },
};
