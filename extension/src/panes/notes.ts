// The "What it did" pane: the pass's notes in words, the values saved for backward, why calls were not fused.
import { notesView } from "../stepinfo";
import type { Pane } from "./registry";

export const notesPane: Pane = {
  id: "notes",
  title: "What it did",
  order: 40,
  needsTrace: false,
  render(step, ctx) {
    const labels = new Map((step.traces?.[ctx.trace]?.graph.nodes ?? []).map((n) => [n.id, n.label]));
    return notesView(ctx.payload, step, labels, (id) => ctx.selection.selectNode(id, "notes"));
  },
};
