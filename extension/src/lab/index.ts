// The thunderlab JupyterLab extension: a sidebar that follows the active notebook's (or console's) kernel.
// One plugin makes the sidebar, its kernel link and models (IThunderlabSidebar); each part is its own plugin.
import { ILabShell, type JupyterFrontEnd, type JupyterFrontEndPlugin } from "@jupyterlab/application";
import type { ISessionContext } from "@jupyterlab/apputils";
import { IEditorServices } from "@jupyterlab/codeeditor";
import { ISettingRegistry } from "@jupyterlab/settingregistry";
import { IStateDB } from "@jupyterlab/statedb";
import { LabIcon, SidePanel } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import type { Source } from "../calldiff";
import { SelectionModel } from "../selection";
import { h } from "../dom";
import { STYLES } from "../record";
import { EXTENSION, FACTORY, FILE_TYPE } from "./document/model";
import { RecordViewerFactory } from "./document/viewer";
import { KernelLink, STATE_WORDS } from "./link";
import { SidebarMemory } from "./memory";
import { PipelineModel } from "./pipeline/model";
import { pipelinePanel } from "./pipeline/panel";
import { RecordsModel } from "./records/model";
import { recordsPanel } from "./records/panel";
import { StepModel } from "./step/model";
import { stepPanel } from "./step/panel";
import { IThunderlabSidebar } from "./tokens";
import { TimingsModel } from "./timings/model";
import { timingsPanel } from "./timings/panel";

const icon = new LabIcon({ name: "thunderlab:bolt", svgstr:
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" d="M13 2 4 14h6l-1 8 9-12h-6z"/></svg>' });

/** The line at the top of the sidebar: the link's state, in words. */
class LinkStatus extends Widget {
  constructor(private link: KernelLink) {
    super();
    this.addClass("tl-link-status");
    link.stateChanged.connect(this.paint, this);
    this.paint();
  }
  paint(): void {
    const s = this.link.state;
    const name = this.link.session?.name || this.link.session?.path || "";
    this.node.dataset.state = s;
    this.node.dataset.busy = String(this.link.busy);
    this.node.replaceChildren(h("span", { class: "tl-dot" }),
      h("span", { class: "tl-words" }, STATE_WORDS[s] + (s === "ready" && this.link.busy ? " The kernel is busy: answers come when the cell finishes; live timings still stream." : "")),
      h("span", { class: "tl-muted tl-session" }, name ? ` · ${name}` : ""));
  }
}

function sessionOf(w: Widget | null): ISessionContext | null {
  const ctx = (w as unknown as { sessionContext?: ISessionContext } | null)?.sessionContext;
  return ctx && typeof ctx === "object" && "kernelChanged" in ctx ? ctx : null;
}

type Editorish = { setCursorPosition(p: { line: number; column: number }): void; revealPosition?(p: { line: number; column: number }): void; focus?(): void };

/** Open a call's source line: its notebook cell (found by execution count) in the followed notebook, or its file. */
async function openSourceIn(app: JupyterFrontEnd, shell: ILabShell, link: KernelLink, src: Source): Promise<string | null> {
  const at = { line: Math.max(0, src.line - 1), column: 0 };
  const goto = (ed: Editorish | null | undefined) => { if (ed) { ed.setCursorPosition(at); ed.revealPosition?.(at); ed.focus?.(); } };
  if (src.cell != null) {
    for (const w of shell.widgets("main")) {
      if (sessionOf(w) !== link.session) continue;
      const nb = (w as any).content;
      const cells: any[] = nb?.widgets ?? [];
      const k = cells.findIndex((c) => c.model?.type === "code" && c.model.executionCount === src.cell);
      if (k < 0) return `cell [${src.cell}] is no longer in this notebook (it was run again or deleted)`;
      shell.activateById(w.id);
      nb.activeCellIndex = k;
      await nb.scrollToItem?.(k);
      goto(cells[k].editor);
      return null;
    }
    return `the notebook that ran cell [${src.cell}] is not open`;
  }
  if (!src.path) return `${src.file} is outside the folder JupyterLab serves: it cannot be opened here`;
  const dir = (link.session?.path ?? "").split("/").slice(0, -1).join("/");
  const path = dir ? `${dir}/${src.path}` : src.path;
  try {
    const w = await app.commands.execute("docmanager:open", { path }) as any;
    await w?.context?.ready;
    goto(w?.content?.editor);
    return null;
  } catch (e) { return `cannot open ${path}: ${e instanceof Error ? e.message : String(e)}`; }
}

const sidebar: JupyterFrontEndPlugin<IThunderlabSidebar> = {
  id: "thunderlab:sidebar",
  description: "The thunderlab sidebar and its link to the active notebook's kernel",
  autoStart: true,
  requires: [ILabShell],
  optional: [ISettingRegistry, IStateDB],
  provides: IThunderlabSidebar,
  activate: (app: JupyterFrontEnd, shell: ILabShell, registry: ISettingRegistry | null, state: IStateDB | null): IThunderlabSidebar => {
    const link = new KernelLink();
    const panel = new SidePanel();
    panel.id = "thunderlab-sidebar";
    panel.addClass("thunderlab");
    panel.addClass("tl-sidebar");
    panel.title.icon = icon;
    panel.title.caption = "thunderlab: compile records and passes";
    const style = h("style", {}, STYLES);
    panel.node.prepend(style);
    panel.header.addWidget(new LinkStatus(link));
    shell.add(panel, "right", { rank: 700 });
    // follow the notebook or console in front; keep the last one while another kind of tab is
    const follow = () => { const ctx = sessionOf(shell.currentWidget); if (ctx) link.follow(ctx); };
    shell.currentChanged.connect(follow);
    follow();
    const ranks = new Map<Widget, [number, number]>();
    const addPanel = (w: Widget, rank: number, size: number) => {
      ranks.set(w, [rank, size]);
      const at = panel.widgets.filter((x) => (ranks.get(x)?.[0] ?? 0) < rank).length;
      panel.insertWidget(at, w as any);
      // the sections share the height by their weight: the step's program gets the most
      (panel.content as unknown as { setRelativeSizes(s: number[]): void }).setRelativeSizes(panel.widgets.map((x) => ranks.get(x)?.[1] ?? 1));
    };
    const settings: IThunderlabSidebar["settings"] = { grouping: "auto", collapseAbove: 300 };
    const memory = new SidebarMemory(state);
    window.addEventListener("beforeunload", () => void memory.flush());
    const step = new StepModel(link, memory);
    if (registry) {
      void registry.load(sidebar.id).then((s) => {
        const read = () => {
          settings.grouping = s.get("grouping").composite as typeof settings.grouping;
          settings.collapseAbove = s.get("collapseAbove").composite as number;
          step.refresh();
        };
        s.changed.connect(read);
        read();
      }).catch((e) => console.warn("thunderlab: settings not loaded:", e));
    }
    const openSource = (src: Source) => openSourceIn(app, shell, link, src);
    return { link, panel, addPanel, settings, step, records: new RecordsModel(), pipeline: new PipelineModel(), timings: new TimingsModel(),
      selection: new SelectionModel(), openSource, memory };
  },
};

const part = (id: string, description: string, rank: number, size: number, add: (tl: IThunderlabSidebar, ...rest: any[]) => Widget,
  extra: any[] = []): JupyterFrontEndPlugin<void> => ({
  id: `thunderlab:${id}`, description, autoStart: true, requires: [IThunderlabSidebar, ...extra],
  activate: (_app: JupyterFrontEnd, tl: IThunderlabSidebar, ...rest: any[]) => tl.addPanel(add(tl, ...rest), rank, size),
});

/** Saved records (*.thunderlab.json) open in a main-area tab with the record's views, no kernel started. */
const documents: JupyterFrontEndPlugin<void> = {
  id: "thunderlab:documents",
  description: "Opens saved thunderlab records (*.thunderlab.json) without a kernel",
  autoStart: true,
  activate: (app: JupyterFrontEnd): void => {
    app.docRegistry.addFileType({ name: FILE_TYPE, displayName: "thunderlab record", extensions: [EXTENSION],
      mimeTypes: ["application/json"], fileFormat: "text", contentType: "file", icon });
    const open = (path: string) => void app.commands.execute("docmanager:open", { path, factory: FACTORY });
    app.docRegistry.addWidgetFactory(new RecordViewerFactory({ name: FACTORY, label: "thunderlab record",
      fileTypes: [FILE_TYPE], defaultFor: [FILE_TYPE], readOnly: true, canStartKernel: false, preferKernel: false },
      app.serviceManager.contents, open));
  },
};

export default [
  sidebar,
  documents,
  part("records", "The kernel's compile records, newest first", 100, 2, recordsPanel),
  part("pipeline", "The pipeline editor: reorder, toggle, add, options, live check, re-run", 200, 4, pipelinePanel),
  part("step", "A step's program, diff, graph and why calls were not fused", 300, 6, stepPanel, [IEditorServices]),
  part("timings", "Live region timings and record comparison", 400, 2, timingsPanel),
];
