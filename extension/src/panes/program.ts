// The Program pane: the step's program, each call's line linked to its node and its source line.
import { programView } from "../stepinfo";
import type { Pane } from "./registry";

export const programPane: Pane = {
  id: "program",
  title: "Program",
  order: 10,
  needsTrace: true,
  render(step, ctx) {
    const t = step.traces![ctx.trace];
    return ctx.program ? ctx.program(t) : programView(t, { selection: ctx.selection, openSource: ctx.openSource });
  },
};
