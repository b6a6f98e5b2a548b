// The graph view: a trace's dataflow graph laid out by ./layout (groups as compound boxes), drawn as SVG
// in a zoomable, pannable viewport with a minimap, search, an executor and change legend, and a details
// panel for the selected node with its links between forward and backward. All text from user code is
// set through textContent / createTextNode / setAttribute only.
import { COMM_COLOR } from "../communication";
import { h } from "../dom";
import type { Graph, GraphNode } from "../payload";
import { collapseGroups, defaultDepth, defaultGrouping, executorColor, groupOf, scopeDepth, type Grouping } from "./groups";
import { layoutCompound, type LayoutResult } from "./layout";
import {
  changeLegend, changeMarks, changeSummary, crossLinks, executorsIn, nextMatch, nodeDetails, nodeWidth,
  searchNodes, typeLine, MARK_TEXT, NODE_H2, type Changes, type Mark,
} from "./model";

export interface GraphViewOptions {
  collapseAbove?: number; grouping?: "auto" | "regions" | "modules" | "none";
  /** the name of the trace shown, and every trace of the step (for forward <-> backward links) */
  trace?: string; traces?: Record<string, Graph>;
  /** show another trace's node (the caller switches trace and passes ``focus``) */
  onJump?: (trace: string, id: string) => void;
  /** a node to select and centre on when the view opens */
  focus?: string | null;
  /** per call id (without the "b"): the executors that declined it and why */
  declines?: Record<string, [string, string][]>;
}

const SVGNS = "http://www.w3.org/2000/svg";
function sv(tag: string, attrs: Record<string, string | number> = {}, text?: string): SVGElement {
  const el = document.createElementNS(SVGNS, tag) as SVGElement;
  for (const k in attrs) el.setAttribute(k, String(attrs[k]));
  if (text !== undefined) el.textContent = text;
  return el;
}

export const MARK_COLOR: Record<Mark | "removed", string> = {
  added: "#1a7f37", executor: "#0969da", changed: "#bf8700", regrouped: "#8250df", removed: "#cf222e",
};
export { COMM_COLOR } from "../communication";
const COLLAPSE_ABOVE = 300;
const CULL_ABOVE = 500;
const FAR = 0.45;  // below this zoom, node text is hidden (unreadable anyway) and the minimap guides

export const GRAPH_CSS = `
.thunderlab .tl-graph-view{display:flex;flex-direction:column;gap:4px}
.thunderlab .tl-graph-bar input.tl-graph-search{width:16em}
.thunderlab .tl-graph-legend{display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center;font-size:12px}
.thunderlab .tl-swatch{display:inline-block;width:12px;height:12px;border:1px solid #666;border-radius:2px;vertical-align:-2px;margin-right:3px}
.thunderlab .tl-graph-main{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}
.thunderlab .tl-graph-wrap{position:relative;flex:1 1 420px;min-width:280px;height:620px;overflow:hidden;border:1px solid var(--jp-border-color2,#d0d0d0);background:var(--jp-layout-color0,#fff);touch-action:none;cursor:grab}
.thunderlab .tl-graph-wrap.tl-panning{cursor:grabbing}
.thunderlab svg.tl-graph{display:block;width:100%;height:100%}
.thunderlab svg.tl-graph text{font:12px ui-monospace,Menlo,Consolas,monospace;pointer-events:none}
.thunderlab svg.tl-graph text.tl-type{font-size:11px;fill:#3a3a3a}
.thunderlab svg.tl-graph text.tl-name{fill:#111}
.thunderlab svg.tl-graph.tl-far text{display:none}
.thunderlab svg.tl-graph .tl-node{cursor:pointer}
.thunderlab svg.tl-graph .tl-edge{fill:none;stroke:var(--jp-ui-font-color3,#9a9a9a);stroke-width:1.2}
.thunderlab svg.tl-graph .tl-edge.tl-near{stroke:var(--jp-brand-color1,#1f6feb);stroke-width:2.4}
.thunderlab svg.tl-graph .tl-group rect{fill:rgba(120,120,200,.06);stroke:#7a7ac0;stroke-dasharray:5,3}
.thunderlab svg.tl-graph .tl-group text{fill:var(--jp-ui-font-color2,#55559a);cursor:pointer;pointer-events:auto}
.thunderlab svg.tl-graph .tl-match rect{stroke:#e3b341 !important;stroke-width:4 !important}
.thunderlab svg.tl-graph .tl-selected rect{stroke:var(--jp-brand-color1,#1f6feb) !important;stroke-width:4 !important}
.thunderlab .tl-minimap{position:absolute;right:6px;bottom:6px;border:1px solid var(--jp-border-color1,#aaa);background:var(--jp-layout-color1,#fafafa);opacity:.92;cursor:crosshair}
.thunderlab .tl-graph-details{flex:0 1 320px;min-width:220px;max-height:620px;overflow:auto;font-size:12px;border:1px solid var(--jp-border-color2,#d0d0d0);padding:6px}
.thunderlab .tl-graph-details table{width:100%}
.thunderlab .tl-graph-details td{overflow-wrap:anywhere;font-family:ui-monospace,monospace}
.thunderlab .tl-graph-details td:first-child{white-space:nowrap;font-family:inherit;color:var(--jp-ui-font-color2,#555)}
.thunderlab .tl-graph-details button{margin:2px 0;text-align:left}
`;

interface View { x: number; y: number; k: number }

export function graphView(g: Graph, changes: Changes | null | undefined, opts: GraphViewOptions = {}): HTMLElement {
  const collapseAbove = opts.collapseAbove ?? COLLAPSE_ABOVE;
  const wrap = h("div", { class: "tl-graph-view" }, h("style", {}, GRAPH_CSS));
  const wanted = opts.grouping ?? "auto";
  let grouping: Grouping = wanted === "regions" ? { by: "regions" } : wanted === "none" ? { by: "none" }
    : wanted === "modules" && scopeDepth(g) ? { by: "modules", depth: defaultDepth(g) } : defaultGrouping(g);
  const collapsed = new Set<string>();
  const byId = new Map(g.nodes.map((n) => [n.id, n]));
  const names = () => [...new Set(g.nodes.map((n) => groupOf(n, grouping)).filter((k): k is string => !!k))];
  const collapseAll = () => { collapsed.clear(); for (const k of names()) collapsed.add(k); };
  const marks = changeMarks(changes);
  const trace = opts.trace ?? "";
  const traces = opts.traces ?? (trace ? { [trace]: g } : {});

  // ---- controls: grouping, search, zoom
  const bar = h("div", { class: "tl-bar tl-graph-bar" });
  const bySel = h("select", { class: "tl-group-by", title: "what the outlined groups are" },
    h("option", { value: "regions" }, "group: fusion regions"),
    h("option", { value: "modules" }, "group: modules"),
    h("option", { value: "none" }, "group: none"));
  const maxDepth = scopeDepth(g);
  if (!maxDepth) bySel.querySelector('option[value="modules"]')!.setAttribute("disabled", "");
  const depthSel = h("select", { class: "tl-depth", title: "module depth" });
  for (let d = 1; d <= maxDepth; d++) depthSel.append(h("option", { value: d }, `depth ${d}`));
  const collapseBtn = h("button", { class: "tl-collapse-all", type: "button" }, "collapse all");
  const expandBtn = h("button", { class: "tl-expand-all", type: "button" }, "expand all");
  const search = h("input", { class: "tl-graph-search", type: "search", placeholder: "search name, op, module, shape…", "aria-label": "search the graph" });
  const prevBtn = h("button", { class: "tl-search-prev", type: "button", title: "previous match (Shift+Enter)" }, "↑");
  const nextBtn = h("button", { class: "tl-search-next", type: "button", title: "next match (Enter)" }, "↓");
  const found = h("span", { class: "tl-muted tl-search-count" });
  const zoomOut = h("button", { class: "tl-zoom-out", type: "button", title: "zoom out" }, "−");
  const zoomIn = h("button", { class: "tl-zoom-in", type: "button", title: "zoom in" }, "+");
  const fitBtn = h("button", { class: "tl-fit", type: "button", title: "show the whole graph" }, "fit");
  bar.append(bySel, depthSel, collapseBtn, expandBtn, search, prevBtn, nextBtn, found, zoomOut, zoomIn, fitBtn);

  // ---- legend: executor colours and what this step changed
  const legend = h("div", { class: "tl-graph-legend" });
  for (const ex of executorsIn(g)) legend.append(h("span", { class: "tl-legend-executor", "data-executor": ex },
    h("span", { class: "tl-swatch", style: `background:${executorColor(ex)}` }), ex));
  if (g.nodes.some((n) => n.kind === "communication")) legend.append(h("span", { class: "tl-legend-communication" },
    h("span", { class: "tl-swatch", style: `background:${COMM_COLOR}` }), "communication (torch.distributed)"));
  legend.append(h("span", { class: "tl-muted tl-changes" }, changeSummary(changes)));
  for (const row of changeLegend(changes)) legend.append(h("span", { class: `tl-legend-mark tl-legend-${row.kind}` },
    h("span", { class: "tl-swatch", style: `background:transparent;border:3px solid ${MARK_COLOR[row.kind]}` }), `${row.count} ${row.text}`));

  // ---- viewport, minimap, details
  const main = h("div", { class: "tl-graph-main" });
  const port = h("div", { class: "tl-graph-wrap" });
  const svg = sv("svg", { class: "tl-graph", xmlns: SVGNS }) as SVGSVGElement;
  const defs = sv("defs");
  const marker = sv("marker", { id: "tl-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto" });
  marker.append(sv("path", { d: "M0,0 L8,4 L0,8 z", fill: "#888" }));
  defs.append(marker);
  const scene = sv("g", { class: "tl-scene" });
  svg.append(defs, scene);
  const mini = h("canvas", { class: "tl-minimap", width: 180, height: 140 });
  port.append(svg, mini);
  const details = h("div", { class: "tl-graph-details" }, h("div", { class: "tl-muted" }, "Click a node for its details."));
  main.append(port, details);
  wrap.append(bar, legend, main);

  let lay: LayoutResult | null = null;
  let shown: Graph = g;
  let view: View = { x: 0, y: 0, k: 1 };
  let selected: string | null = null;
  let matches: string[] = [];
  const nodeEls = new Map<string, SVGElement>();
  const edgeEls: { src: string; dst: string; el: SVGElement }[] = [];
  let fitted = false;
  let pending = false;  // a re-cull is scheduled for the next frame
  const matchShown = new Set<string>();  // what the search highlights: matches, or the folded groups holding them

  const portSize = () => ({ w: port.clientWidth || 800, h: port.clientHeight || 600 });
  const apply = () => {
    scene.setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    svg.classList.toggle("tl-far", view.k < FAR);
    svg.setAttribute("data-zoom", view.k.toFixed(3));
    paintMini();
    if (culled && !pending && typeof requestAnimationFrame === "function") {
      pending = true;
      requestAnimationFrame(() => { pending = false; renderScene(); });
    }
  };
  const fit = () => {
    if (!lay) return;
    const { w, h: ht } = portSize();
    const k = Math.min(w / lay.width, ht / lay.height, 1.5);
    view = { k, x: (w - lay.width * k) / 2, y: Math.max(0, (ht - lay.height * k) / 2) };
    apply();
  };
  const zoomAt = (factor: number, cx: number, cy: number) => {
    const k = Math.max(0.02, Math.min(4, view.k * factor));
    view = { k, x: cx - ((cx - view.x) * k) / view.k, y: cy - ((cy - view.y) * k) / view.k };
    apply();
  };
  const centre = (id: string) => {
    const b = lay?.nodes.get(id);
    if (!b) return;
    const { w, h: ht } = portSize();
    const k = Math.max(view.k, 0.9);
    view = { k, x: w / 2 - (b.x + b.width / 2) * k, y: ht / 2 - (b.y + b.height / 2) * k };
    apply();
    renderScene();  // the node is in the DOM now, not a frame later
  };

  // the minimap: every node as a dot in its executor's colour, the viewport as a rectangle
  let miniScale = 1, miniOff = { x: 0, y: 0 };
  function paintMini(): void {
    const ctx = mini.getContext("2d");
    if (!ctx || !lay) return;
    const W = mini.width, H = mini.height;
    miniScale = Math.min(W / lay.width, H / lay.height);
    miniOff = { x: (W - lay.width * miniScale) / 2, y: (H - lay.height * miniScale) / 2 };
    ctx.clearRect(0, 0, W, H);
    ctx.fillStyle = "rgba(122,122,192,.15)";
    for (const gb of lay.groups) ctx.fillRect(miniOff.x + gb.x * miniScale, miniOff.y + gb.y * miniScale, gb.width * miniScale, gb.height * miniScale);
    for (const n of shown.nodes) {
      const b = lay.nodes.get(n.id)!;
      ctx.fillStyle = marks.has(n.id) ? MARK_COLOR[marks.get(n.id)!] : n.kind === "communication" ? COMM_COLOR : n.executor ? executorColor(n.executor) : "#999";
      ctx.fillRect(miniOff.x + b.x * miniScale, miniOff.y + b.y * miniScale, Math.max(1.5, b.width * miniScale), Math.max(1.5, b.height * miniScale));
    }
    const { w, h: ht } = portSize();
    ctx.strokeStyle = "#1f6feb"; ctx.lineWidth = 1.5;
    ctx.strokeRect(miniOff.x + (-view.x / view.k) * miniScale, miniOff.y + (-view.y / view.k) * miniScale, (w / view.k) * miniScale, (ht / view.k) * miniScale);
  }
  const miniPan = (ev: PointerEvent) => {
    const r = mini.getBoundingClientRect();
    const gx = (ev.clientX - r.left - miniOff.x) / miniScale, gy = (ev.clientY - r.top - miniOff.y) / miniScale;
    const { w, h: ht } = portSize();
    view = { ...view, x: w / 2 - gx * view.k, y: ht / 2 - gy * view.k };
    apply();
  };
  mini.addEventListener("pointerdown", (ev) => { ev.stopPropagation(); miniPan(ev); mini.setPointerCapture?.(ev.pointerId); });
  mini.addEventListener("pointermove", (ev) => { if (ev.buttons & 1) miniPan(ev); });

  // pan by dragging, zoom with the wheel (around the pointer)
  let drag: { x: number; y: number; vx: number; vy: number; moved: boolean } | null = null;
  port.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    drag = { x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y, moved: false };
  });
  port.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) { drag.moved = true; port.classList.add("tl-panning"); port.setPointerCapture?.(ev.pointerId); }
    view = { ...view, x: drag.vx + dx, y: drag.vy + dy };
    apply();
  });
  const endDrag = () => { setTimeout(() => { drag = null; }, 0); port.classList.remove("tl-panning"); };
  port.addEventListener("pointerup", endDrag);
  port.addEventListener("pointercancel", endDrag);
  port.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = port.getBoundingClientRect();
    zoomAt(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  const centreOfPort = () => { const { w, h: ht } = portSize(); return [w / 2, ht / 2] as const; };
  zoomIn.addEventListener("click", () => zoomAt(1.25, ...centreOfPort()));
  zoomOut.addEventListener("click", () => zoomAt(0.8, ...centreOfPort()));
  fitBtn.addEventListener("click", fit);
  const wasDrag = () => !!drag?.moved;

  // ---- selection and details
  const declinesOf = (id: string) => opts.declines?.[id.replace(/^b/, "")] ?? [];
  const showDetails = (id: string | null) => {
    details.replaceChildren();
    const n = id ? (byId.get(id) ?? shown.nodes.find((m) => m.id === id)) : null;
    if (!n) { details.append(h("div", { class: "tl-muted" }, "Click a node for its details.")); return; }
    if (n.id.startsWith("group:")) {
      const name = n.id.slice(6);
      const open = h("button", { type: "button", class: "tl-expand-group" }, `expand ${name}`);
      open.addEventListener("click", () => { collapsed.delete(name); draw(); });
      details.append(h("strong", {}, name), h("div", {}, n.label), open);
      return;
    }
    const body = h("tbody");
    for (const [k, v] of nodeDetails(g, n, { mark: marks.get(n.id), declines: declinesOf(n.id) }))
      body.append(h("tr", { "data-key": k }, h("td", {}, k), h("td", {}, v)));
    details.append(h("strong", { class: "tl-details-title" }, n.label), h("table", { class: "tl-details" }, body));
    const links = crossLinks(trace, n, traces);
    if (links.length) {
      const box = h("div", { class: "tl-links" }, h("div", { class: "tl-muted" }, n.derived_from ? "comes from (forward):" : "derived in other traces:"));
      for (const l of links.slice(0, 40)) {
        const b = h("button", { type: "button", class: "tl-jump", "data-trace": l.trace, "data-id": l.id }, `→ ${l.trace}: ${l.label} (${l.id})`);
        b.addEventListener("click", () => opts.onJump ? opts.onJump(l.trace, l.id) : undefined);
        box.append(b);
      }
      if (links.length > 40) box.append(h("div", { class: "tl-muted" }, `and ${links.length - 40} more`));
      details.append(box);
    }
  };
  const select = (id: string | null, centreIt = false) => {
    if (selected) nodeEls.get(selected)?.classList.remove("tl-selected");
    for (const e of edgeEls) e.el.classList.remove("tl-near");
    selected = id;
    if (id) {
      nodeEls.get(id)?.classList.add("tl-selected");
      for (const e of edgeEls) if (e.src === id || e.dst === id) e.el.classList.add("tl-near");
      if (centreIt) { centre(id); nodeEls.get(id)?.classList.add("tl-selected"); }
    }
    wrap.setAttribute("data-selected", id ?? "");
    showDetails(id);
  };
  /** Show node ``id``: expand the collapsed group holding it, select and centre it. */
  const reveal = (id: string) => {
    const n = byId.get(id);
    const k = n ? groupOf(n, grouping) : null;
    if (k && collapsed.has(k)) { collapsed.delete(k); draw(); }
    select(lay?.nodes.has(id) ? id : k && lay?.nodes.has(`group:${k}`) ? `group:${k}` : null, true);
  };

  // ---- search
  const markMatches = () => {
    for (const el of scene.querySelectorAll(".tl-match")) el.classList.remove("tl-match");
    matchShown.clear();
    for (const id of matches) {
      const n = byId.get(id)!, k = groupOf(n, grouping);
      matchShown.add(k && collapsed.has(k) ? `group:${k}` : id);
    }
    for (const id of matchShown) nodeEls.get(id)?.classList.add("tl-match");
  };
  const runSearch = () => {
    matches = searchNodes(g, search.value);
    found.textContent = search.value.trim() ? `${matches.length} found` : "";
    markMatches();
  };
  const step = (dir: 1 | -1) => {
    if (!matches.length) runSearch();
    const next = nextMatch(matches, selected, dir);
    if (next) { reveal(next); found.textContent = `${matches.indexOf(next) + 1} of ${matches.length}`; markMatches(); }
  };
  search.addEventListener("input", runSearch);
  search.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); step(ev.shiftKey ? -1 : 1); } });
  nextBtn.addEventListener("click", () => step(1));
  prevBtn.addEventListener("click", () => step(-1));

  // ---- grouping controls
  const sync = () => {
    bySel.value = grouping.by;
    depthSel.style.display = grouping.by === "modules" ? "" : "none";
    if (grouping.by === "modules") depthSel.value = String(grouping.depth);
  };
  const regroup = (next: Grouping) => {
    grouping = next;
    collapsed.clear();
    if (g.nodes.length > collapseAbove) collapseAll();
    sync(); draw();
  };
  bySel.addEventListener("change", () => {
    const by = bySel.value;
    regroup(by === "modules" ? { by: "modules", depth: defaultDepth(g) } : by === "regions" ? { by: "regions" } : { by: "none" });
  });
  depthSel.addEventListener("change", () => regroup({ by: "modules", depth: Number(depthSel.value) }));
  collapseBtn.addEventListener("click", () => { collapseAll(); draw(); });
  expandBtn.addEventListener("click", () => { collapsed.clear(); draw(); });

  // one click handler for the whole scene: a node selects (a folded group expands), an outline folds its group
  scene.addEventListener("click", (ev) => {
    if (wasDrag()) return;
    const t = ev.target as Element;
    const node = t.closest?.("g.tl-node"), group = t.closest?.("g.tl-group");
    const id = node?.getAttribute("data-id");
    if (id) {
      if (id.startsWith("group:")) { collapsed.delete(id.slice(6)); draw(); } else select(id);
    } else if (group) { collapsed.add(group.getAttribute("data-group")!); draw(); }
  });

  // ---- drawing
  // Above CULL_ABOVE (500) shown nodes only what lies in (or near) the viewport is in the DOM: the minimap shows
  // the whole graph, and panning or zooming brings the rest in. Smaller graphs are drawn whole.
  interface EdgeItem { src: string; dst: string; d: string; x0: number; y0: number; x1: number; y1: number }
  let edgeItems: EdgeItem[] = [];
  let nodeMarks = new Map<string, Mark>();
  let culled = false;
  let drawnRect = { x0: 0, y0: 0, x1: 0, y1: 0 };
  function draw(): void {
    shown = collapseGroups(g, grouping, collapsed);
    nodeMarks = new Map(marks);  // a folded group is marked when a member is
    for (const n of g.nodes) {
      const k = groupOf(n, grouping);
      if (k && collapsed.has(k) && marks.has(n.id) && !nodeMarks.has(`group:${k}`)) nodeMarks.set(`group:${k}`, "changed");
    }
    lay = layoutCompound(
      shown.nodes.map((n) => ({ id: n.id, width: nodeWidth(n), height: NODE_H2, group: n.id.startsWith("group:") ? null : groupOf(n, grouping) })),
      shown.edges, { floatSources: (id) => byId.get(id)?.kind === "input" });
    edgeItems = [];
    for (const e of shown.edges) {
      const a = lay.nodes.get(e.src), b = lay.nodes.get(e.dst);
      if (!a || !b) continue;
      const x1 = a.x + a.width / 2, y1 = a.y + a.height, x2 = b.x + b.width / 2, y2 = b.y;
      const my = (y1 + y2) / 2;
      edgeItems.push({ src: e.src, dst: e.dst, d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`,
        x0: Math.min(x1, x2), y0: Math.min(y1, y2), x1: Math.max(x1, x2), y1: Math.max(y1, y2) });
    }
    culled = shown.nodes.length > CULL_ABOVE;
    if (selected && !lay.nodes.has(selected)) selected = null;
    if (!fitted || !port.isConnected) { fitted = true; initialView(); } else apply();
    renderScene(true);
    if (selected) select(selected);
  }

  /** The part of the graph to put in the DOM: everything, or the viewport with a margin of half a viewport. */
  function wantedRect() {
    if (!culled || !lay) return { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity };
    const { w, h: ht } = portSize();
    const x0 = -view.x / view.k, y0 = -view.y / view.k, vw = w / view.k, vh = ht / view.k;
    return { x0: x0 - vw / 2, y0: y0 - vh / 2, x1: x0 + vw * 1.5, y1: y0 + vh * 1.5 };
  }

  function renderScene(force = false): void {
    if (!lay) return;
    const r = wantedRect();
    if (!force && culled) {
      // still inside what is drawn, and not zoomed out much further: keep the DOM as it is
      const { w, h: ht } = portSize();
      const x0 = -view.x / view.k, y0 = -view.y / view.k;
      const inside = x0 >= drawnRect.x0 && y0 >= drawnRect.y0 && x0 + w / view.k <= drawnRect.x1 && y0 + ht / view.k <= drawnRect.y1;
      if (inside) return;
    }
    if (!force && !culled) return;
    drawnRect = r;
    const hit = (x0: number, y0: number, x1: number, y1: number) => x1 >= r.x0 && x0 <= r.x1 && y1 >= r.y0 && y0 <= r.y1;
    const frag = document.createDocumentFragment();
    for (const gb of lay.groups) {
      if (!hit(gb.x, gb.y, gb.x + gb.width, gb.y + gb.height)) continue;
      const box = sv("g", { class: "tl-group", "data-group": gb.name });
      box.append(sv("rect", { x: gb.x, y: gb.y, width: gb.width, height: gb.height, rx: 6 }));
      box.append(sv("title", {}, `${gb.name}: click to collapse`), sv("text", { x: gb.x + 6, y: gb.y + 13 }, `▾ ${gb.name}`));
      frag.append(box);
    }
    edgeEls.length = 0;
    const edgeLayer = sv("g", { class: "tl-edges" });
    for (const e of edgeItems) {
      if (!hit(e.x0, e.y0, e.x1, e.y1)) continue;
      const near = selected !== null && (e.src === selected || e.dst === selected);
      const el = sv("path", { class: near ? "tl-edge tl-near" : "tl-edge", d: e.d, "marker-end": "url(#tl-arrow)" });
      edgeEls.push({ src: e.src, dst: e.dst, el });
      edgeLayer.append(el);
    }
    frag.append(edgeLayer);
    nodeEls.clear();
    for (const n of shown.nodes) {
      const b = lay.nodes.get(n.id)!;
      if (!hit(b.x, b.y, b.x + b.width, b.y + b.height)) continue;
      const mark = nodeMarks.get(n.id);
      const cls = `tl-node tl-kind-${n.kind}${mark ? ` tl-mark-${mark}` : ""}${mark === "executor" ? " tl-mark-changed" : ""}` +
        `${n.id === selected ? " tl-selected" : ""}${matchShown.has(n.id) ? " tl-match" : ""}`;
      const node = sv("g", { class: cls, "data-id": n.id });
      node.append(sv("rect", { x: b.x, y: b.y, width: b.width, height: b.height, rx: n.kind === "input" || n.kind === "output" ? 17 : 4,
        fill: n.kind === "input" || n.kind === "output" ? "#eeeeee" : n.kind === "communication" ? COMM_COLOR : executorColor(n.executor),
        stroke: mark ? MARK_COLOR[mark] : "#666", "stroke-width": mark ? 3 : 1 }));
      node.append(sv("text", { class: "tl-name", x: b.x + b.width / 2, y: b.y + 15, "text-anchor": "middle" }, n.label));
      const tl = typeLine(n);
      if (tl) node.append(sv("text", { class: "tl-type", x: b.x + b.width / 2, y: b.y + 29, "text-anchor": "middle" }, tl));
      nodeEls.set(n.id, node);
      frag.append(node);
    }
    scene.replaceChildren(frag);
    svg.setAttribute("data-drawn", String(nodeEls.size));
  }

  // the first view: the whole graph when it is readable so, else the top of it at a readable zoom
  function initialView(): void {
    if (!lay) return;
    const { w, h: ht } = portSize();
    const k = Math.min(w / lay.width, ht / lay.height, 1.2);
    if (k >= 0.6) { fit(); return; }
    view = { k: 0.85, x: Math.min(10, (w - lay.width * 0.85) / 2), y: 10 };
    apply();
  }

  sync();
  regroup(grouping);
  // sizes are known once the view is in the page
  const ready = () => {
    if (!port.isConnected || !port.clientWidth) return false;
    initialView();
    if (opts.focus) reveal(opts.focus);
    return true;
  };
  if (typeof requestAnimationFrame === "function") {
    let tries = 0;
    const wait = () => { if (!ready() && tries++ < 600) requestAnimationFrame(wait); };
    requestAnimationFrame(wait);
  }
  return wrap;
}

export { MARK_TEXT };
export type { GraphNode };
