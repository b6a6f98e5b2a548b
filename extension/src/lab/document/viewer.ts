// The record document viewer: a saved record (*.thunderlab.json) opened from the file browser in a
// main-area tab, drawn by the same views as the report, with no kernel. A folder of records (written
// by THUNDERLAB_RECORDS) is browsed record by record from the bar at the top.
import { ABCWidgetFactory, DocumentWidget, type DocumentRegistry, type IDocumentWidget } from "@jupyterlab/docregistry";
import type { Contents } from "@jupyterlab/services";
import { Widget } from "@lumino/widgets";
import { h } from "../../dom";
import { renderRecord, showProblems } from "../../record";
import { DOC_CSS, readRecord, siblings } from "./model";

/** The body of a record tab: the folder bar, then the record's views. */
export class RecordView extends Widget {
  private bar = h("div", { class: "tl-doc-bar" });
  private root = h("div", { class: "tl-doc-record" });
  private current: number | null = null;

  constructor(private context: DocumentRegistry.Context, private contents: Contents.IManager,
              private open: (path: string) => void) {
    super();
    this.addClass("thunderlab");
    this.addClass("tl-doc");
    this.node.append(h("style", {}, DOC_CSS), this.bar, this.root);
    void context.ready.then(() => { this.draw(); void this.folder(); });
    context.model.contentChanged.connect(() => this.draw());
  }

  /** Draw the record from the file's text (again when the file changes on disk and is reverted). */
  private draw(): void {
    const got = readRecord(this.context.model.toString());
    this.node.dataset.state = "problems" in got ? "problem" : "ready";
    if ("problems" in got) { showProblems(this.root, got.problems, `thunderlab cannot show ${this.context.path}`); return; }
    const payload = got.payload;
    const show = (i: number): void => {
      this.current = i;
      renderRecord(this.root, payload, { current: i, onSelect: show });
    };
    show(this.current ?? payload.steps.length - 1);
  }

  /** The bar: where this record sits among the records of its folder, with the previous and next. */
  private async folder(): Promise<void> {
    const path = this.context.path;
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
    let files: string[] = [];
    try {
      const listing = await this.contents.get(dir, { content: true });
      files = siblings((listing.content ?? []) as { name: string; path: string; type: string }[]);
    } catch {
      files = [];
    }
    const k = files.indexOf(path);
    const step = (d: number) => {
      const b = h("button", { class: "jp-Button jp-mod-styled jp-mod-minimal tl-doc-nav", type: "button",
        title: d < 0 ? "the previous record in this folder" : "the next record in this folder" },
        d < 0 ? "‹ previous" : "next ›") as HTMLButtonElement;
      const to = files[k + d];
      b.disabled = k < 0 || to === undefined;
      if (to !== undefined) b.addEventListener("click", () => this.open(to));
      return b;
    };
    const where = files.length > 1 && k >= 0 ? `record ${k + 1} of ${files.length} in ${dir || "this folder"}` : "";
    this.bar.replaceChildren(h("span", { class: "tl-muted" }, "Saved record, opened without a kernel"),
      h("span", { class: "tl-doc-where" }, where), step(-1), step(1));
  }
}

/** Makes a RecordView tab for each *.thunderlab.json opened with this viewer. */
export class RecordViewerFactory extends ABCWidgetFactory<IDocumentWidget<RecordView>> {
  constructor(options: DocumentRegistry.IWidgetFactoryOptions<IDocumentWidget<RecordView>>,
              private contents: Contents.IManager, private open: (path: string) => void) {
    super(options);
  }

  protected createNewWidget(context: DocumentRegistry.Context): IDocumentWidget<RecordView> {
    const content = new RecordView(context, this.contents, this.open);
    const widget = new DocumentWidget({ content, context });
    widget.addClass("tl-doc-widget");
    return widget;
  }
}
