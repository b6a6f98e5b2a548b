// The records panel: every compile record in the kernel, newest first, filtered by name, in pages.
import { PanelWithToolbar, ToolbarButton, refreshIcon } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { h } from "../../dom";
import type { IThunderlabSidebar } from "../tokens";
import { capturedTag, originTag } from "./model";

function age(created: number): string {
  const s = Math.max(0, Date.now() / 1000 - created);
  return s < 60 ? `${Math.round(s)} s ago` : s < 3600 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
}

export class RecordsBody extends Widget {
  constructor(private tl: IThunderlabSidebar) {
    super();
    this.addClass("tl-records");
    tl.records.changed.connect(this.paint, this);
    this.paint();
  }

  paint(): void {
    const m = this.tl.records;
    const { rows, total, pages } = m.view();
    const filter = h("input", { class: "tl-filter jp-mod-styled", type: "search", placeholder: "filter by name", spellcheck: "false" });
    filter.value = m.filter;
    filter.addEventListener("input", () => { m.setFilter(filter.value); });
    const list = h("ul", { class: "tl-record-list", role: "listbox", "aria-label": "compile records" });
    for (const r of rows) {
      const li = h("li", { class: `tl-record${r.record === m.selected ? " tl-selected" : ""}`, role: "option", "data-record": r.record, tabindex: 0 },
        h("span", { class: "tl-record-name" }, r.name),
        h("span", { class: "tl-record-meta" }, `#${r.record} · graph ${r.graph} · ${r.steps - 1} passes · ${age(r.created)}`),
        originTag(r.origin) ? h("span", { class: "tl-record-origin", title: r.origin!.summary }, originTag(r.origin)) : null,
        r.as_captured ? h("span", { class: "tl-record-captured", title: capturedTag(r.as_captured).title }, capturedTag(r.as_captured).text) : null,
        r.error ? h("span", { class: "tl-record-error", title: r.error }, "failed") : null,
        h("span", { class: "tl-record-pipeline", title: r.pipeline }, r.pipeline));
      li.addEventListener("click", () => m.select(r.record));
      li.addEventListener("keydown", (e) => { if (e.key === "Enter") m.select(r.record); });
      list.append(li);
    }
    const pager = h("div", { class: "tl-pager" });
    if (pages > 1) {
      const prev = h("button", { class: "jp-Button jp-mod-minimal tl-page-prev", type: "button" }, "‹ newer");
      const next = h("button", { class: "jp-Button jp-mod-minimal tl-page-next", type: "button" }, "older ›");
      prev.disabled = m.page === 0;
      next.disabled = m.page >= pages - 1;
      prev.addEventListener("click", () => m.setPage(m.page - 1));
      next.addEventListener("click", () => m.setPage(m.page + 1));
      pager.append(prev, h("span", {}, `page ${m.page + 1} of ${pages}`), next);
    }
    const empty = total ? null : h("div", { class: "tl-empty" },
      m.size ? "No record matches the filter." : "No compile records yet: call a function made by thunderlab.jit.");
    const hadFocus = document.activeElement === this.node.querySelector(".tl-filter");
    this.node.replaceChildren(filter, list, pager, ...(empty ? [empty] : []));
    if (hadFocus) { filter.focus(); filter.setSelectionRange(filter.value.length, filter.value.length); }
  }
}

/** Lists records from the kernel, adds pushed ones, and opens the chosen one. */
export function recordsPanel(tl: IThunderlabSidebar): PanelWithToolbar {
  const panel = new PanelWithToolbar();
  panel.id = "thunderlab-records";
  panel.title.label = "Records";
  panel.addClass("tl-panel");
  // each notebook's sidebar comes back as it was left: the record it showed (and, in StepModel, the step)
  tl.records.selectedChanged.connect((_, r) => { if (r !== null) tl.memory.set(tl.link.session?.path, { record: r }); });
  const reload = async () => {
    if (!tl.link.ready) return;
    try {
      const r = await tl.link.request("records.list", { limit: 500 });
      tl.records.reset(r.records);
      await tl.memory.ready;
      const before = tl.memory.get(tl.link.session?.path).record;
      if (tl.records.selected === null && before !== undefined && tl.records.row(before)) tl.records.select(before);
      else if (tl.records.selected === null && r.records.length) tl.records.select(r.records[0].record);
      else if (tl.records.selected !== null && tl.step.payload === null) void tl.step.open(tl.records.selected);
    } catch (e) { console.warn("thunderlab: listing records failed:", e); }
  };
  panel.toolbar.addItem("refresh", new ToolbarButton({ icon: refreshIcon, tooltip: "List the kernel's records again", onClick: () => void reload() }));
  panel.addWidget(new RecordsBody(tl));
  // a new kernel (or a restarted one) has other records: list them afresh
  tl.link.connected.connect(() => void reload());
  tl.link.stateChanged.connect((_, state) => {
    if (state === "restarting" || state === "dead") {  // a new kernel numbers its records afresh
      tl.step.forget();
    }
    if (state === "restarting" || state === "connecting" || state === "no-kernel") { tl.records.reset([]); tl.records.select(null); }
  });
  tl.link.pushed.connect((_, ev) => {
    if (ev.type !== "record.new" && ev.type !== "record.update") return;
    const { type: _t, ...row } = ev;
    if (ev.type === "record.update" && !tl.records.row(row.record)) return;  // not listed (a page not loaded): no news
    tl.records.add(row);
    if (ev.type === "record.new") tl.records.select(row.record);  // follow the notebook: the newest compile is shown
  });
  tl.records.selectedChanged.connect((_, r) => void tl.step.open(r));
  return panel;
}
