// The registry: the step page's panes, in tab order. A new pane is a file in this folder and its line here
// (test/layers.test.mjs fails when a pane file is missing from this list).
import { diffPane } from "./diff";
import { graphPane } from "./graph";
import { notesPane } from "./notes";
import { programPane } from "./program";
import type { Pane } from "./registry";
import { timingsPane } from "./timings";

export const PANES: readonly Pane[] = [programPane, diffPane, graphPane, notesPane, timingsPane];

/** Every pane's styles, for the page that draws them. */
export const PANE_CSS = PANES.map((p) => p.css ?? "").join("");

export { renderPane, type Pane, type PaneContext, type PaneState, type Traces } from "./registry";
