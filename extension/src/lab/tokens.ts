// What the sidebar's plugins share: the kernel link, the models, and the side panel they add their parts to.
import { Token } from "@lumino/coreutils";
import type { SidePanel } from "@jupyterlab/ui-components";
import type { Widget } from "@lumino/widgets";
import type { Source } from "../calldiff";
import type { SelectionModel } from "../selection";
import type { KernelLink } from "./link";
import type { SidebarMemory } from "./memory";
import type { PipelineModel } from "./pipeline/model";
import type { RecordsModel } from "./records/model";
import type { StepModel } from "./step/model";
import type { TimingsModel } from "./timings/model";

export interface IThunderlabSidebar {
  readonly link: KernelLink;
  readonly records: RecordsModel;
  readonly step: StepModel;
  readonly pipeline: PipelineModel;
  readonly timings: TimingsModel;
  /** Per notebook: the record, step, trace and view last shown (kept in JupyterLab's state database). */
  readonly memory: SidebarMemory;
  /** The selected call: the program, diff and graph views select and follow it (selectNode(id)). */
  readonly selection: SelectionModel;
  /** Open a call's source: the notebook cell (by execution count) or the file; resolves to a problem in words, or null. */
  openSource(s: Source): Promise<string | null>;
  /** The sidebar: each part's plugin adds one panel (a PanelWithToolbar) to it with addPanel. */
  readonly panel: SidePanel;
  /** The user's settings (JupyterLab's settings registry, plugin thunderlab:sidebar). */
  readonly settings: { grouping: "auto" | "regions" | "modules" | "none"; collapseAbove: number };
  /** Add a part; `rank` orders the parts from the top (records 100, pipeline 200, step 300, timings 400). */
  addPanel(widget: Widget, rank: number, size: number): void;
}

export const IThunderlabSidebar = new Token<IThunderlabSidebar>("thunderlab:IThunderlabSidebar",
  "The thunderlab sidebar: its kernel link and models");
