// The Timings pane: every pass's compile time (this step marked), the fusion regions' times and the kernels.
import { stepTimingsView } from "../stepinfo";
import type { Pane } from "./registry";

export const timingsPane: Pane = {
  id: "timings",
  title: "Timings",
  order: 50,
  needsTrace: false,
  render: (step, ctx) => stepTimingsView(ctx.payload, step),
};
