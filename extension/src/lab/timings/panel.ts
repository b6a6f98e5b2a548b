// The timings panel: per fusion region, which version ran, how often, median and min, updating while the
// notebook keeps calling the program; and a comparison with another record (after a pipeline edit).
import { PanelWithToolbar } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { h } from "../../views";
import type { Comparison } from "../protocol";
import type { IThunderlabSidebar } from "../tokens";
import { timingRows, totalCalls } from "./model";

const SVGNS = "http://www.w3.org/2000/svg";

function bars(rows: ReturnType<typeof timingRows>): SVGElement {
  const max = Math.max(1e-9, ...rows.map((r) => r.median_ms));
  const w = 220, bh = 14;
  const svg = document.createElementNS(SVGNS, "svg");
  svg.setAttribute("class", "tl-bars");
  svg.setAttribute("width", String(w));
  svg.setAttribute("height", String(rows.length * (bh + 4)));
  rows.forEach((r, i) => {
    const rect = document.createElementNS(SVGNS, "rect");
    rect.setAttribute("x", "0");
    rect.setAttribute("y", String(i * (bh + 4)));
    rect.setAttribute("height", String(bh));
    rect.setAttribute("width", String(Math.max(1, (w * r.median_ms) / max)));
    rect.setAttribute("class", r.running ? "tl-bar-running" : "tl-bar-old");
    const title = document.createElementNS(SVGNS, "title");
    title.textContent = `${r.region} (${r.version}): median ${r.median_ms.toFixed(3)} ms over ${r.count} calls`;
    rect.append(title);
    svg.append(rect);
  });
  return svg;
}

class TimingsBody extends Widget {
  comparison: Comparison | null = null;
  compareError = "";

  constructor(private tl: IThunderlabSidebar) {
    super();
    this.addClass("tl-timings-view");
    tl.timings.changed.connect(this.paint, this);
    tl.step.changed.connect(this.paint, this);
    this.paint();
  }

  paint(): void {
    const ev = this.tl.timings.latest;
    const rows = timingRows(ev);
    const parts: HTMLElement[] = [];
    if (!rows.length) {
      parts.push(h("div", { class: "tl-empty" }, ev ? "No fusion region has been timed yet: compile with thunderlab.jit(..., timing=True) and call it."
        : "Choose a record to see its regions' timings."));
    } else {
      parts.push(h("div", { class: "tl-calls", "data-calls": totalCalls(ev) }, `${totalCalls(ev)} timed region calls so far (live)`));
      const table = h("table", { class: "tl-timings-table" },
        h("thead", {}, h("tr", {}, ...["region", "version", "calls", "median ms", "min ms"].map((t) => h("th", {}, t)))));
      const body = h("tbody");
      for (const r of rows) {
        body.append(h("tr", { class: r.running ? "tl-running" : "" }, h("td", {}, r.region), h("td", {}, `${r.executor}/${r.version}${r.running ? " ●" : ""}`),
          h("td", { class: "tl-num" }, String(r.count)), h("td", { class: "tl-num" }, r.median_ms.toFixed(3)), h("td", { class: "tl-num" }, r.min_ms.toFixed(3))));
      }
      table.append(body);
      parts.push(table, h("div", { class: "tl-muted" }, "median time per region and version (executor/version; ● running now: a region runs its torch version until its fused kernel is compiled)"));
      parts.push(bars(rows) as unknown as HTMLElement);
    }
    parts.push(this._compare());
    this.node.replaceChildren(...parts);
  }

  private _compare(): HTMLElement {
    const box = h("div", { class: "tl-compare" }, h("h4", {}, "Compare with another record"));
    const s = this.tl.step;
    if (s.record === null) return box;
    const sel = h("select", { class: "tl-compare-with", "aria-label": "record to compare with" }, h("option", { value: "" }, "choose a record…"));
    for (const r of this.tl.records.view().rows) if (r.record !== s.record) sel.append(h("option", { value: r.record }, `#${r.record} ${r.name}: ${r.pipeline}`));
    sel.addEventListener("change", async () => {
      if (!sel.value) return;
      try {
        this.comparison = await this.tl.link.request("records.compare", { a: Number(sel.value), b: s.record!, time: true });
        this.compareError = "";
      } catch (e) { this.comparison = null; this.compareError = e instanceof Error ? e.message : String(e); }
      this.paint();
    });
    box.append(sel);
    if (this.compareError) box.append(h("div", { class: "tl-error" }, this.compareError));
    const c = this.comparison;
    if (c && c.b === s.record) {
      box.append(h("div", {}, `symbols ${c.symbols[0]} → ${c.symbols[1]} · fusion regions ${c.regions[0]} → ${c.regions[1]}`),
        c.seconds ? h("div", { class: "tl-call-time" }, `call time ${(c.seconds[0] * 1e3).toFixed(3)} ms (#${c.a}) → ${(c.seconds[1] * 1e3).toFixed(3)} ms (#${c.b})`) : null as any);
      const steps = h("table", { class: "tl-compare-steps" }, h("tr", {}, ...["#", `#${c.a}`, "ms", `#${c.b}`, "ms"].map((t) => h("th", {}, t))));
      for (const st of c.steps) steps.append(h("tr", {}, h("td", {}, String(st.index)), h("td", {}, st.a ?? ""), h("td", { class: "tl-num" }, st.a_ms?.toFixed(1) ?? ""),
        h("td", {}, st.b ?? ""), h("td", { class: "tl-num" }, st.b_ms?.toFixed(1) ?? "")));
      box.append(steps);
      const lines = c.program_diff ? c.program_diff.split("\n").length : 0;
      box.append(h("div", { class: "tl-muted" }, lines ? `final programs differ (${lines} diff lines)` : "final programs print the same"));
      if (c.program_diff) box.append(h("pre", { class: "tl-compare-diff" }, c.program_diff));
    }
    return box;
  }
}

export function timingsPanel(tl: IThunderlabSidebar): PanelWithToolbar {
  const panel = new PanelWithToolbar();
  panel.id = "thunderlab-timings";
  panel.title.label = "Timings";
  panel.addClass("tl-panel");
  panel.addWidget(new TimingsBody(tl));
  const subscribe = async (record: number | null) => {
    tl.timings.clear();
    if (!tl.link.ready) return;
    try {
      const r = await tl.link.request("timings.subscribe", { record });
      if (r.record !== null) tl.timings.update(r as any);
    } catch { /* said by the link's state */ }
  };
  tl.records.selectedChanged.connect((_, r) => void subscribe(r));
  tl.link.pushed.connect((_, ev) => { if (ev.type === "timings" && ev.record === tl.records.selected) tl.timings.update(ev); });
  return panel;
}
