// src/calldiff.ts
function statementOf(line) {
  const at = line.indexOf("  # ");
  return (at >= 0 ? line.slice(0, at) : line).trim();
}
function sides(t) {
  const lines = t.program.split("\n");
  const out = /* @__PURE__ */ new Map();
  for (const c of t.calls ?? []) {
    out.set(c.id, { text: c.line ? statementOf(lines[c.line - 1] ?? "") : c.op, executor: c.executor, region: c.region });
  }
  return out;
}
function changeWords(a, b) {
  const why = [];
  if (a.region !== b.region) {
    why.push(b.region ? a.region ? `moved from ${a.region} to ${b.region}` : `fused into ${b.region}` : `taken out of ${a.region}`);
  }
  if (a.executor !== b.executor) why.push(`executor ${a.executor ?? "none"} → ${b.executor ?? "none"}`);
  if (a.text !== b.text) why.push("rewritten");
  return why;
}
function alignCalls(before, after) {
  const cached = aligned.get(before)?.get(after);
  if (cached) return cached;
  const rows = align(before, after);
  if (!aligned.has(before)) aligned.set(before, /* @__PURE__ */ new WeakMap());
  aligned.get(before).set(after, rows);
  return rows;
}
var aligned = /* @__PURE__ */ new WeakMap();
function align(before, after) {
  const A = sides(before), B = sides(after);
  const aOrder = (before.calls ?? []).map((c) => c.id), bOrder = (after.calls ?? []).map((c) => c.id);
  const removedAfter = /* @__PURE__ */ new Map();
  let anchor = "";
  for (const id of aOrder) {
    if (B.has(id)) {
      anchor = id;
      continue;
    }
    const list = removedAfter.get(anchor);
    if (list) list.push(id);
    else removedAfter.set(anchor, [id]);
  }
  const rows = [];
  const pushRemoved = (key) => {
    for (const id of removedAfter.get(key) ?? []) rows.push({ kind: "removed", id, a: A.get(id), b: null, why: [] });
  };
  pushRemoved("");
  const seen = /* @__PURE__ */ new Set();
  for (const id of bOrder) {
    if (seen.has(id)) continue;
    seen.add(id);
    const a = A.get(id) ?? null, b = B.get(id);
    if (!a) rows.push({ kind: "added", id, a: null, b, why: [] });
    else {
      const why = changeWords(a, b);
      rows.push({ kind: why.length ? "changed" : "same", id, a, b, why });
    }
    pushRemoved(id);
  }
  return rows;
}
function summarizeCalls(rows, regionExecutor = () => null) {
  const count = { same: 0, changed: 0, added: 0, removed: 0 };
  const handed = /* @__PURE__ */ new Map();
  const fused = /* @__PURE__ */ new Map();
  const newRegion = /* @__PURE__ */ new Map();
  let rewritten = 0;
  for (const r of rows) {
    count[r.kind]++;
    if (r.kind === "changed" && r.a && r.b) {
      if (r.a.executor !== r.b.executor) {
        const k = `${r.a.executor ?? "none"} → ${r.b.executor ?? "none"}`;
        handed.set(k, (handed.get(k) ?? 0) + 1);
      }
      if (r.b.region && r.a.region !== r.b.region) fused.set(r.b.region, (fused.get(r.b.region) ?? 0) + 1);
      if (r.a.text !== r.b.text) rewritten++;
    }
    if (r.b?.region && r.kind === "added") newRegion.set(r.b.region, (newRegion.get(r.b.region) ?? 0) + 1);
  }
  const lines = [];
  const total = count.changed + count.added + count.removed;
  lines.push(total ? `${count.changed} calls changed, ${count.added} added, ${count.removed} removed, ${count.same} unchanged` : `no call changed (${count.same} calls, same text, executor and region)`);
  if (handed.size) lines.push("executor assignment: " + [...handed].map(([k, n]) => `${n} ${k}`).join(", "));
  if (fused.size) {
    const regions = [...fused.keys()];
    const calls = [...fused.values()].reduce((x, y) => x + y, 0);
    const names = regions.slice(0, 6).map((g) => `${g} (${fused.get(g)} calls${regionExecutor(g) ? `, ${regionExecutor(g)}` : ""})`).join(", ");
    lines.push(`fused ${calls} calls into ${regions.length} region${regions.length > 1 ? "s" : ""}: ${names}${regions.length > 6 ? ", …" : ""}`);
  }
  if (rewritten) lines.push(`${rewritten} calls rewritten (their printed text differs)`);
  return { ...count, lines };
}
function foldUnchanged(rows, context = 2) {
  const out = [];
  const keep = new Uint8Array(rows.length);
  rows.forEach((r, i) => {
    if (r.kind === "same") return;
    for (let k = Math.max(0, i - context); k <= Math.min(rows.length - 1, i + context); k++) keep[k] = 1;
  });
  let run = [];
  const flush = () => {
    if (run.length) {
      out.push(run.length === 1 ? { row: run[0] } : { fold: run });
      run = [];
    }
  };
  rows.forEach((r, i) => {
    if (keep[i] || r.kind !== "same") {
      flush();
      out.push({ row: r });
    } else run.push(r);
  });
  flush();
  return out;
}
function signatureOf(program) {
  const defs = program.split("\n").filter((l) => l.startsWith("def "));
  return defs.length ? defs[defs.length - 1] : "";
}
function signatureRow(a, b) {
  const count = (s2) => {
    const m = /\(([^)]*)\)/.exec(s2);
    return m && m[1].trim() ? m[1].split(",").filter((x) => x.trim()).length : 0;
  };
  const short = (s2) => s2.replace(/\(.*\)/, `(${count(s2)} inputs)`);
  const same = a === b;
  const d = h(
    "details",
    { class: "tl-sig" },
    h("summary", {}, same ? `signature unchanged: ${short(b)}` : `signature changed: ${short(a)} → ${short(b)}`),
    h("div", { class: "tl-sig-text" }, same ? b : `before: ${a}
after:  ${b}`)
  );
  return d;
}
function side(s2, why = []) {
  if (!s2) return h("td", { class: "tl-cd-empty" });
  const tag = [s2.executor, s2.region].filter(Boolean).join(" · ");
  return h(
    "td",
    {},
    h("span", { class: "tl-cd-text" }, s2.text),
    tag ? h("span", { class: "tl-cd-exec" }, ` [${tag}]`) : null,
    why.length ? h("div", { class: "tl-cd-why" }, why.join("; ")) : null
  );
}
var drawn_ = /* @__PURE__ */ new WeakMap();
function callDiffView(before, after, opts = {}) {
  const limit = opts.limit ?? 60;
  const rows = alignCalls(before, after);
  let derived = drawn_.get(rows);
  if (!derived) {
    derived = { sum: summarizeCalls(rows, opts.regionExecutor), shown: foldUnchanged(rows, opts.context ?? 2) };
    drawn_.set(rows, derived);
  }
  const sum = derived.sum;
  const box = h("div", { class: "tl-calldiff" });
  box.append(h("div", { class: "tl-cd-summary" }, ...sum.lines.map((l) => h("div", {}, l))));
  box.append(signatureRow(signatureOf(before.program), signatureOf(after.program)));
  const table = h(
    "table",
    { class: "tl-cd-table" },
    h("colgroup", {}, h("col", { class: "tl-cd-col" }), h("col", { class: "tl-cd-col" })),
    h("thead", {}, h("tr", {}, h("th", {}, opts.beforeName ?? "before"), h("th", {}, opts.afterName ?? "after")))
  );
  const body = h("tbody");
  table.append(body);
  const shown = derived.shown;
  const rowEl = (r) => {
    const tr = h("tr", { class: `tl-cd-${r.kind}`, "data-id": r.id }, side(r.a), side(r.b, r.why));
    if (opts.onSelect) tr.addEventListener("click", () => opts.onSelect(r.id));
    return tr;
  };
  const foldEl = (run) => {
    const tr = h("tr", { class: "tl-cd-fold" }, h("td", { colspan: 2 }, h("button", { type: "button", class: "tl-cd-unfold" }, `⋯ ${run.length} unchanged calls`)));
    tr.querySelector("button").addEventListener("click", () => tr.replaceWith(...run.map(rowEl)));
    return tr;
  };
  let drawn = 0;
  const more = h("button", { type: "button", class: "tl-cd-more" });
  const drawUpTo = (n) => {
    const frag = document.createDocumentFragment();
    for (; drawn < Math.min(n, shown.length); drawn++) {
      const s2 = shown[drawn];
      frag.append("row" in s2 ? rowEl(s2.row) : foldEl(s2.fold));
    }
    body.append(frag);
    const left = shown.length - drawn;
    more.textContent = `show ${Math.min(left, limit)} more rows (${left} left)`;
    more.style.display = left > 0 ? "" : "none";
  };
  more.addEventListener("click", () => drawUpTo(drawn + limit));
  drawUpTo(limit);
  if (!rows.length) box.append(h("div", { class: "tl-muted" }, "(no calls)"));
  else box.append(table, more);
  return box;
}

// src/selection.ts
var SelectionModel = class {
  constructor() {
    this._id = null;
    this._listeners = /* @__PURE__ */ new Set();
  }
  /** The selected node's id ("b<stable id>"), or null. */
  get selected() {
    return this._id;
  }
  /** Select node `id` (null: none); `source` names the view that asked, so it need not react to itself. */
  selectNode(id, source = "") {
    if (id === this._id) return;
    this._id = id;
    for (const fn of [...this._listeners]) fn(id, source);
  }
  /** Call `fn` on every change; returns the function that stops it. */
  onChange(fn) {
    this._listeners.add(fn);
    return () => {
      this._listeners.delete(fn);
    };
  }
};
var models = /* @__PURE__ */ new WeakMap();
function selectionOf(owner) {
  let m = models.get(owner);
  if (!m) {
    m = new SelectionModel();
    models.set(owner, m);
  }
  return m;
}

// src/stepinfo.ts
var PARAM = /(^|_)(weight|bias|running_mean|running_var|num_batches_tracked|inv_freq|in_proj_weight|in_proj_bias)(_\d+)?$/;
function splitInputs(names) {
  const args = [], params = [];
  for (const n of names) (PARAM.test(n.name) ? params : args).push(n);
  return { args, params };
}
function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
function verificationWords(v) {
  if (!v) return { text: "not checked", cls: "tl-muted", title: "" };
  if (!v.ok) return { text: `✗ ${v.detail || v.structural}`, cls: "tl-fail", title: v.detail || v.structural };
  if (v.max_error != null) return { text: `✓ numbers match eager (max err ${v.max_error.toExponential(1)})`, cls: "tl-ok", title: "outputs compared with eager PyTorch on the captured inputs" };
  return { text: "✓ structure only", cls: "tl-ok tl-structural", title: "the program is well formed; numbers were not compared (thunderlab.jit(..., verify=True) compares them)" };
}
function noteLines(spec, notes) {
  const n = notes ?? {};
  const pass = spec.replace(/^-/, "").split("{")[0].trim();
  const out = [];
  if (!Object.keys(n).length) return out;
  if (pass === "claim") {
    const by = Object.entries(n.by_executor ?? {}).map(([k, v]) => `${k} ${v}`).join(", ");
    out.push(`claim handed out the calls: ${by || "none"}`);
    out.push(`${n.kept_whole ?? 0} calls kept whole, ${n.decomposed ?? 0} decomposed` + (n.decomposed_symbols?.length ? ` (${n.decomposed_symbols.join(", ")})` : ""));
    const declined = Object.keys(n.declines ?? {}).length;
    if (declined) out.push(`${declined} calls were declined by at least one executor (see "why not fused" below)`);
  } else if (pass === "fuse") {
    const regions = Object.entries(n.regions ?? {});
    const members = regions.reduce((s2, [, r]) => s2 + (r.members ?? 0), 0);
    out.push(regions.length ? `fuse made ${regions.length} regions from ${members} calls: ` + regions.slice(0, 8).map(([k, r]) => `${k} (${r.members} calls, ${r.executor})`).join(", ") + (regions.length > 8 ? ", …" : "") : "fuse made no region");
    const left = Object.keys(n.left_out ?? {}).length;
    if (left) out.push(`${left} calls left to torch (see "why not fused" below)`);
  } else if (pass === "remat") {
    out.push(`remat decided: recompute=${n.recompute ?? "?"} (${n.why ?? "no reason given"})`);
    if (n.saved_before != null) {
      out.push(`saved for backward: ${n.saved_before} values (${bytes(n.saved_bytes_before ?? 0)}) → ${n.saved_after} values (${bytes(n.saved_bytes_after ?? 0)}); ${n.recomputed ?? 0} calls recomputed in backward`);
    }
  } else if (pass === "autodiff") {
    if (n.differentiated === false) out.push("autodiff: nothing requires grad, no backward trace");
    else out.push(`autodiff saved ${(n.saved ?? []).length} values for backward (${bytes(n.saved_bytes ?? 0)})`);
  } else {
    for (const [k, v] of Object.entries(n)) {
      if (k === "traceback") continue;
      const text = typeof v === "string" ? v : JSON.stringify(v);
      out.push(`${k}: ${text.length > 200 ? text.slice(0, 199) + "…" : text}`);
    }
  }
  return out;
}
function declineRows(p, step) {
  const by = /* @__PURE__ */ new Map();
  const last = Math.min(step, p.steps.length - 1);
  let claim = -1;
  for (let i = last; i >= 0 && claim < 0; i--) if (p.steps[i].notes?.declines) claim = i;
  if (claim >= 0) for (const [id, r] of Object.entries(p.steps[claim].notes.declines)) by.set(`b${id}`, r.slice());
  for (let i = Math.max(0, claim); i <= last; i++) {
    const n = p.steps[i].notes;
    if (n?.left_out) {
      for (const [id, why] of Object.entries(n.left_out)) {
        const list = by.get(`b${id}`) ?? [];
        if (!list.some(([, w]) => w === why)) list.push(["fuse", why]);
        by.set(`b${id}`, list);
      }
    }
  }
  return [...by].map(([id, reasons]) => ({ id, reasons }));
}
function switches(history) {
  if (!history.length) return [];
  const t0 = history[0][0];
  return history.map(([t, v]) => ({ version: v, after_s: t - t0 }));
}
function inputsLine(p) {
  const names = p.input_names;
  if (!names || !names.length) return h("span", { class: "tl-inputs" }, `inputs: ${p.inputs.join(", ") || "(none)"}`);
  const { args, params } = splitInputs(names);
  const line = h("span", { class: "tl-inputs" }, "inputs: ");
  args.forEach((a, i) => line.append(i ? ", " : "", h("code", { class: "tl-input" }, a.name), ` ${a.type}`));
  if (params.length) {
    line.append(h(
      "details",
      { class: "tl-params" },
      h("summary", {}, `${args.length ? "+ " : ""}${params.length} parameters and buffers`),
      h("div", { class: "tl-param-list" }, ...params.map((x) => h("div", {}, h("code", {}, x.name), ` ${x.type}`)))
    ));
  }
  return line;
}
function savedView(saved) {
  const rows = saved.values.slice().sort((a, b) => b.bytes - a.bytes);
  return h(
    "details",
    { class: "tl-saved" },
    h("summary", {}, `saved for backward: ${saved.values.length} values, ${bytes(saved.bytes)}`),
    h(
      "table",
      { class: "tl-saved-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "value"), h("th", {}, "type"), h("th", { class: "tl-num" }, "bytes"))),
      h("tbody", {}, ...rows.map((v) => h("tr", {}, h("td", {}, h("code", {}, v.name)), h("td", {}, v.type), h("td", { class: "tl-num" }, bytes(v.bytes)))))
    )
  );
}
function notesView(p, st, labels, onSelect) {
  const box = h("div", { class: "tl-notes-view" });
  const v = verificationWords(st.verification);
  box.append(h(
    "div",
    {},
    h("strong", {}, `step ${st.index}: ${st.spec}`),
    ` · ${ms(st.seconds)} ms · ${st.symbols_before} → ${st.symbols_after} symbols · `,
    h("span", { class: v.cls, title: v.title }, v.text)
  ));
  const lines = noteLines(st.spec, st.notes);
  box.append(lines.length ? h("ul", { class: "tl-notes" }, ...lines.map((l) => h("li", {}, l))) : h("div", { class: "tl-muted" }, st.index === 0 ? "the program TorchDynamo captured" : "this pass reported nothing more"));
  const fw = st.traces?.forward;
  if (fw?.saved) box.append(savedView(fw.saved));
  const rows = declineRows(p, st.index);
  if (rows.length) {
    const list = h("ul", { class: "tl-whynot" });
    for (const r of rows.slice(0, 500)) {
      const name = h("code", { class: "tl-call-link", "data-id": r.id }, labels.get(r.id) ?? r.id);
      if (onSelect) name.addEventListener("click", () => onSelect(r.id));
      list.append(h("li", {}, name, h("ul", {}, ...r.reasons.map(([ex, why]) => h("li", {}, h("strong", {}, ex), `: ${why}`)))));
    }
    box.append(h(
      "details",
      { class: "tl-whynot-box", ...rows.length <= 30 ? { open: "" } : {} },
      h("summary", {}, `why not fused: ${rows.length} calls declined by an executor`),
      list,
      rows.length > 500 ? h("div", { class: "tl-muted" }, `… and ${rows.length - 500} more`) : null
    ));
  }
  return box;
}
function stepTimingsView(p, st) {
  const box = h("div", { class: "tl-step-timings" });
  const max = Math.max(1e-9, ...p.steps.map((s2) => s2.seconds));
  const passes = h("table", { class: "tl-pass-times" }, h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "pass"), h("th", { class: "tl-num" }, "ms"), h("th", {}, ""))));
  const body = h("tbody");
  for (const s2 of p.steps) {
    body.append(h(
      "tr",
      { class: s2.index === st.index ? "tl-current" : "" },
      h("td", { class: "tl-num" }, String(s2.index)),
      h("td", {}, s2.spec),
      h("td", { class: "tl-num" }, ms(s2.seconds)),
      h("td", { class: "tl-bar-cell" }, h("span", { class: "tl-hbar", style: `width:${Math.max(1, Math.round(80 * s2.seconds / max))}px` }))
    ));
  }
  passes.append(body);
  box.append(h("div", { class: "tl-muted" }, `compile time by pass (total ${ms(p.compile_seconds)} ms); this step is marked`), passes);
  const regions = Object.entries(p.regions);
  const here = st.traces ? Object.values(st.traces).reduce((n, t) => n + t.stats.regions, 0) : null;
  if (here === 0 || !regions.length) {
    const fuse = p.steps.find((s2) => /^fuse\b/.test(s2.spec));
    box.append(h("div", { class: "tl-muted" }, regions.length && fuse ? `no fusion region at this step: regions run from step ${fuse.index} (${fuse.spec}) on` : "(no fusion regions)"));
    return box;
  }
  const table = h("table", { class: "tl-region-times" }, h("thead", {}, h("tr", {}, ...["region", "version", "calls", "median ms", "min ms", "switched"].map((t) => h("th", {}, t)))));
  const tb = h("tbody");
  let timed = false;
  for (const [name, r] of regions) {
    const sw = switches(r.history).slice(1).map((x) => `→ ${x.version} after ${x.after_s.toFixed(2)} s`).join(", ");
    const versions = Object.entries(r.timings);
    if (versions.length) timed = true;
    const rows = versions.length ? versions : [[r.version, null]];
    for (const [ver, t] of rows) {
      tb.append(h(
        "tr",
        {},
        h("td", {}, name),
        h("td", {}, `${r.executor}/${ver}${ver === r.version ? " ●" : ""}`),
        h("td", { class: "tl-num" }, t ? String(t.count) : "–"),
        h("td", { class: "tl-num" }, t ? ms(t.median_s) : "–"),
        h("td", { class: "tl-num" }, t ? ms(t.min_s) : "–"),
        h("td", {}, sw || (r.error ? `failed: ${r.error}` : "–"))
      ));
    }
  }
  table.append(tb);
  box.append(h("div", { class: "tl-muted" }, timed ? "per fusion region (● the version running now); per-kernel times: thunderlab.profile()" : "regions not timed: compile with thunderlab.jit(..., timing=True) to time each region"), table);
  return box;
}
function sourceText(s2) {
  return s2.cell != null ? `cell [${s2.cell}] line ${s2.line}` : `${s2.path ?? s2.file}:${s2.line}`;
}
var FIRST_LINES = 150;
var SLICE_LINES = 1e3;
function programView(t, opts = {}) {
  const box = h("div", { class: "tl-program-view" });
  const byLine = /* @__PURE__ */ new Map();
  for (const c of t.calls ?? []) if (c.line) byLine.set(c.line, c);
  const bar = h("div", { class: "tl-source-bar tl-muted" }, t.calls ? "click a call to see where it came from" : "");
  const pre = h("pre", { class: "tl-program" });
  const lines = t.program.replace(/\n$/, "").split("\n");
  const draw = (from, to) => {
    const frag = document.createDocumentFragment();
    for (let i = from; i < Math.min(to, lines.length); i++) {
      const c = byLine.get(i + 1);
      const el = h("div", { class: c ? "tl-line tl-call-line" : "tl-line", ...c ? { "data-id": c.id } : {} });
      highlightInto(el, lines[i] || " ");
      frag.append(el);
    }
    pre.append(frag);
    if (to < lines.length) setTimeout(() => {
      if (pre.isConnected) draw(to, to + SLICE_LINES);
    }, 0);
  };
  draw(0, FIRST_LINES);
  const show = (id) => {
    pre.querySelector(".tl-line-selected")?.classList.remove("tl-line-selected");
    const c = id ? (t.calls ?? []).find((x) => x.id === id) : void 0;
    if (!c) {
      bar.replaceChildren(t.calls ? "click a call to see where it came from" : "");
      return;
    }
    const el = pre.querySelector(`[data-id="${c.id}"]`);
    el?.classList.add("tl-line-selected");
    const s2 = c.source;
    bar.replaceChildren(
      h("code", {}, c.op),
      c.executor ? ` [${c.executor}${c.region ? ` · ${c.region}` : ""}]` : "",
      s2 ? " ← " : " (no source line: made by a pass" + (c.origin ? `, ${c.origin}` : "") + ")"
    );
    if (s2) {
      const where = opts.openSource ? h("a", { class: "tl-source-link", href: "#", title: "open the source" }, sourceText(s2)) : h("span", { class: "tl-source-link" }, sourceText(s2));
      if (opts.openSource) where.addEventListener("click", (e) => {
        e.preventDefault();
        opts.openSource(s2);
      });
      bar.append(where, s2.scope ? ` · ${s2.scope}` : "", s2.code ? h("div", {}, h("code", { class: "tl-source-code" }, s2.code)) : "");
    }
  };
  pre.addEventListener("click", (e) => {
    const el = e.target.closest("[data-id]");
    if (!el) return;
    opts.selection?.selectNode(el.dataset.id, "program");
    if (!opts.selection) show(el.dataset.id);
  });
  if (opts.selection) {
    const stop = opts.selection.onChange((id) => {
      if (!box.isConnected) {
        stop();
        return;
      }
      show(id);
    });
    if (opts.selection.selected) show(opts.selection.selected);
  }
  box.append(bar, pre);
  return box;
}
var KEYWORDS = /* @__PURE__ */ new Set(["def", "return", "import", "from", "as", "del", "None", "True", "False", "if", "else", "for", "in", "lambda", "not", "and", "or"]);
var TOKEN = /(#.*$)|('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
function highlightInto(el, line) {
  let last = 0;
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(line); m; m = TOKEN.exec(line)) {
    const cls = m[1] ? "tl-hl-comment" : m[2] ? "tl-hl-string" : m[3] ? "tl-hl-number" : KEYWORDS.has(m[4]) ? "tl-hl-keyword" : null;
    if (!cls) continue;
    if (m.index > last) el.append(line.slice(last, m.index));
    el.append(h("span", { class: cls }, m[0]));
    last = m.index + m[0].length;
  }
  if (last < line.length) el.append(line.slice(last));
}
var STEP_CSS = `
.thunderlab .tl-inputs code{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-params{display:inline-block;margin-left:6px}
.thunderlab .tl-params summary{cursor:pointer;color:var(--jp-content-link-color,#1a6fc9)}
.thunderlab .tl-param-list{max-height:160px;overflow:auto;font-size:11px}
.thunderlab .tl-structural{opacity:.85}
.thunderlab .tl-notes{margin:4px 0;padding-left:18px}
.thunderlab .tl-saved summary,.thunderlab .tl-whynot-box summary{cursor:pointer;margin:4px 0}
.thunderlab .tl-saved-table td,.thunderlab .tl-saved-table th{padding:1px 6px}
.thunderlab .tl-saved-table{max-height:240px;display:block;overflow:auto}
.thunderlab .tl-whynot{padding-left:16px}
.thunderlab .tl-call-link{cursor:pointer}
.thunderlab .tl-hbar{display:inline-block;height:10px;background:var(--jp-brand-color1,#2f7ed8);border-radius:2px}
.thunderlab .tl-pass-times .tl-current,.thunderlab .tl-region-times .tl-current{background:var(--jp-layout-color2,#eef)}
.thunderlab .tl-program .tl-line{white-space:pre;min-height:1.35em}
.thunderlab .tl-program .tl-call-line{cursor:pointer}
.thunderlab .tl-program .tl-call-line:hover{background:var(--jp-layout-color2,rgba(0,0,0,.04))}
.thunderlab .tl-line-selected{background:var(--jp-brand-color3,#dbeaff) !important;outline:1px solid var(--jp-brand-color1,#2f7ed8)}
.thunderlab .tl-source-bar{min-height:1.4em;margin:4px 0;overflow-wrap:anywhere}
.thunderlab .tl-source-code{font-family:var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-hl-keyword{color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold}
.thunderlab .tl-hl-string{color:var(--jp-mirror-editor-string-color,#ba2121)}
.thunderlab .tl-hl-number{color:var(--jp-mirror-editor-number-color,#080)}
.thunderlab .tl-hl-comment{color:var(--jp-mirror-editor-comment-color,#408080);font-style:italic}
.thunderlab .tl-calldiff{font-size:12px}
.thunderlab .tl-cd-summary{margin:4px 0;line-height:1.45}
.thunderlab .tl-sig summary{cursor:pointer;overflow-wrap:anywhere;font-family:var(--jp-code-font-family,ui-monospace,monospace);font-size:11px}
.thunderlab .tl-sig-text{white-space:pre-wrap;overflow-wrap:anywhere;font:11px var(--jp-code-font-family,ui-monospace,monospace);max-height:160px;overflow:auto}
.thunderlab .tl-cd-table{border-collapse:collapse;width:100%;table-layout:fixed;font:11px/1.35 var(--jp-code-font-family,ui-monospace,monospace)}
.thunderlab .tl-cd-table td,.thunderlab .tl-cd-table th{white-space:pre-wrap;overflow-wrap:anywhere;vertical-align:top;padding:1px 4px;border-bottom:1px solid var(--jp-border-color3,#eee)}
.thunderlab .tl-cd-why{color:var(--jp-warn-color0,#8a5a00);font-family:var(--jp-ui-font-family,system-ui,sans-serif)}
.thunderlab .tl-cd-exec{color:var(--jp-ui-font-color2,#666)}
.thunderlab .tl-cd-removed td:first-child,.thunderlab .tl-cd-changed td:first-child{background:rgba(248,81,73,.16)}
.thunderlab .tl-cd-added td:nth-child(2),.thunderlab .tl-cd-changed td:nth-child(2){background:rgba(46,160,67,.16)}
.thunderlab .tl-cd-fold button,.thunderlab .tl-cd-more{border:none;background:none;color:var(--jp-content-link-color,#1a6fc9);cursor:pointer;padding:2px 0;font:inherit}
`;

// src/views.ts
function classifyDiffLine(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("\\")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}
var NODE_W = 150;
var NODE_H = 26;
var GAP_X = 24;
var GAP_Y = 46;
var PAD = 16;
function layoutGraph(graph) {
  var _a;
  const ids = graph.nodes.map((n) => n.id);
  const known = new Set(ids);
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const e of graph.edges) {
    if (!known.has(e.src) || !known.has(e.dst) || e.src === e.dst) continue;
    preds.get(e.dst).push(e.src);
    succs.get(e.src).push(e.dst);
  }
  const indeg = new Map(ids.map((id) => [id, preds.get(id).length]));
  const queue = ids.filter((id) => indeg.get(id) === 0);
  const order = [];
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    order.push(id);
    for (const s2 of succs.get(id)) {
      indeg.set(s2, indeg.get(s2) - 1);
      if (indeg.get(s2) === 0) queue.push(s2);
    }
  }
  const placed = new Set(order);
  for (const id of ids) if (!placed.has(id)) order.push(id);
  const layer = /* @__PURE__ */ new Map();
  for (const id of order) {
    let l = 0;
    for (const p of preds.get(id)) if (layer.has(p)) l = Math.max(l, layer.get(p) + 1);
    layer.set(id, l);
  }
  const rows = [];
  for (const id of order) (rows[_a = layer.get(id)] ?? (rows[_a] = [])).push(id);
  const positions = /* @__PURE__ */ new Map();
  let widest = 0;
  rows.forEach((row, l) => {
    widest = Math.max(widest, row.length);
    row.forEach((id, i) => positions.set(id, { x: PAD + i * (NODE_W + GAP_X), y: PAD + l * (NODE_H + GAP_Y), layer: l }));
  });
  return {
    positions,
    width: PAD * 2 + Math.max(0, widest * (NODE_W + GAP_X) - GAP_X),
    height: PAD * 2 + Math.max(0, rows.length * (NODE_H + GAP_Y) - GAP_Y)
  };
}
function scopeAt(scope, depth) {
  if (!scope) return null;
  const parts = scope.split(".");
  return parts.length >= depth ? parts.slice(0, depth).join(".") : null;
}
function groupOf(n, g) {
  if (g.by === "regions") return n.group;
  if (g.by === "modules") return scopeAt(n.scope, g.depth);
  return null;
}
function scopeDepth(graph) {
  let d = 0;
  for (const n of graph.nodes) if (n.scope) d = Math.max(d, n.scope.split(".").length);
  return d;
}
function defaultDepth(graph) {
  const max = scopeDepth(graph);
  for (let d = 1; d <= max; d++) {
    const count = /* @__PURE__ */ new Map();
    for (const n of graph.nodes) {
      const k = scopeAt(n.scope, d);
      if (k) count.set(k, (count.get(k) ?? 0) + 1);
    }
    if ([...count.values()].filter((c) => c >= 2).length >= 2) return d;
  }
  return Math.max(1, max);
}
function defaultGrouping(graph) {
  if (graph.nodes.some((n) => n.group)) return { by: "regions" };
  if (graph.nodes.some((n) => n.scope)) return { by: "modules", depth: defaultDepth(graph) };
  return { by: "none" };
}
function collapseGroups(graph, grouping, collapsed) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const rep = (id) => {
    const n = byId.get(id);
    const k = n ? groupOf(n, grouping) : null;
    return k && collapsed.has(k) ? `group:${k}` : id;
  };
  const nodes = [];
  const seen = /* @__PURE__ */ new Map();
  const members = /* @__PURE__ */ new Map();
  for (const n of graph.nodes) {
    const id = rep(n.id);
    if (id !== n.id) members.set(id, (members.get(id) ?? 0) + 1);
    if (seen.has(id)) continue;
    const node = id === n.id ? n : {
      id,
      label: "",
      kind: "region",
      executor: grouping.by === "regions" ? n.executor : null,
      source: null,
      group: null,
      scope: grouping.by === "modules" ? groupOf(n, grouping) : null
    };
    seen.set(id, node);
    nodes.push(node);
  }
  for (const [id, count] of members) seen.get(id).label = `▸ ${id.slice(6)} (${count})`;
  const edges = [];
  const dedup = /* @__PURE__ */ new Set();
  for (const e of graph.edges) {
    const src = rep(e.src), dst = rep(e.dst);
    if (src === dst) continue;
    const key = `${src}\0${dst}\0${e.value}`;
    if (dedup.has(key)) continue;
    dedup.add(key);
    edges.push({ ...e, src, dst });
  }
  return { nodes, edges };
}
function passName(spec) {
  return spec.trim().replace(/^-/, "").split("{")[0].trim();
}
function pipelinePasses(pipeline) {
  return pipeline.replace(/\{[^{}]*\}/g, "").split(",").map((x) => x.trim()).filter((x) => x && !x.startsWith("-")).map(passName);
}
var PALETTE = ["#cfe3ff", "#d5f5d5", "#ffe2b8", "#f3d0f7", "#fff3a6", "#c9f1ee", "#ffd0d0", "#e2e2e2"];
function executorColor(executor) {
  if (!executor) return "#ffffff";
  let h2 = 0;
  for (let i = 0; i < executor.length; i++) h2 = h2 * 31 + executor.charCodeAt(i) >>> 0;
  return PALETTE[h2 % PALETTE.length];
}
var ms = (s2) => (s2 * 1e3).toFixed(s2 < 0.01 ? 3 : 1);
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}
var SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}
var CSS = `
.thunderlab{font:13px/1.4 var(--jp-ui-font-family,system-ui,sans-serif);color:var(--jp-ui-font-color1,#1d1d1f);background:var(--jp-layout-color0,#fff)}
.thunderlab h2{font-size:16px;margin:4px 0}
.thunderlab .tl-meta{color:var(--jp-ui-font-color2,#555);margin-bottom:6px}
.thunderlab .tl-error{color:#b00020;white-space:pre-wrap;font-family:ui-monospace,monospace}
.thunderlab .tl-error:empty,.thunderlab .tl-status:empty{display:none}
.thunderlab .tl-status{color:#0a5;margin:4px 0}
.thunderlab .tl-bar{display:flex;gap:6px;align-items:center;flex-wrap:wrap;margin:6px 0}
.thunderlab .tl-pipeline{font-family:var(--jp-code-font-family,ui-monospace,monospace);min-width:0;flex:1 1 180px;box-sizing:border-box;max-width:100%}
.thunderlab .tl-steps-wrap{overflow-x:auto;max-width:100%}
.thunderlab .tl-meta,.thunderlab h2,.thunderlab .tl-muted{overflow-wrap:anywhere}
.thunderlab .tl-steps td:nth-child(4){white-space:nowrap}
.thunderlab .tl-steps td:nth-child(2){overflow-wrap:anywhere;min-width:4em}
.thunderlab .tl-steps td,.thunderlab .tl-steps th{padding:2px 5px}
.thunderlab table{border-collapse:collapse}
.thunderlab td,.thunderlab th{border-bottom:1px solid var(--jp-border-color2,#e4e4e4);padding:2px 8px;text-align:left;vertical-align:top}
.thunderlab th{background:var(--jp-layout-color2,#f4f4f6)}
.thunderlab .tl-step{cursor:pointer}
.thunderlab .tl-step:hover{background:var(--jp-layout-color2,#f0f6ff)}
.thunderlab .tl-current{background:var(--jp-brand-color3,#dbeaff) !important;font-weight:600}
.thunderlab .tl-ok{color:#0a7a2f}.thunderlab .tl-fail{color:#b00020;font-weight:600}
.thunderlab .tl-num{text-align:right;font-variant-numeric:tabular-nums}
.thunderlab .tl-tabs{display:flex;flex-wrap:wrap;gap:2px;margin-top:10px;border-bottom:1px solid var(--jp-border-color1,#ccc)}
.thunderlab .tl-tabs button{border:1px solid var(--jp-border-color1,#ccc);border-bottom:none;background:var(--jp-layout-color2,#f4f4f6);color:inherit;padding:3px 10px;cursor:pointer}
.thunderlab .tl-tabs button.tl-active{background:var(--jp-layout-color0,#fff);font-weight:600}
.thunderlab pre,.thunderlab .tl-diff{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:var(--jp-layout-color1,#fafafa);border:1px solid var(--jp-border-color2,#e4e4e4);padding:6px;overflow:auto;max-height:560px;margin:4px 0}
.thunderlab .tl-diff div{white-space:pre}
.thunderlab .tl-add{background:rgba(46,160,67,.18)}.thunderlab .tl-del{background:rgba(248,81,73,.18)}
.thunderlab .tl-hunk{color:#8a63d2;background:rgba(130,80,223,.12)}.thunderlab .tl-meta-line{color:#888}
.thunderlab .tl-graph-wrap{overflow:auto;max-height:640px;border:1px solid var(--jp-border-color2,#e4e4e4)}
.thunderlab svg.tl-graph text{font:11px ui-monospace,monospace;pointer-events:none}
.thunderlab svg.tl-graph .tl-group,.thunderlab svg.tl-graph .tl-kind-region{cursor:pointer}
.thunderlab .tl-muted{color:var(--jp-ui-font-color2,#888)}
`;
function header(p, opts) {
  const err = [p.error, opts.error].filter(Boolean).join("\n");
  return h(
    "div",
    { class: "tl-header" },
    h("h2", {}, p.name),
    h("div", { class: "tl-meta" }, inputsLine(p)),
    h("div", { class: "tl-meta" }, `pipeline: ${p.pipeline} · total ${ms(p.compile_seconds)} ms · ${p.steps.length} steps`),
    h("div", { class: "tl-status" }, opts.status ?? ""),
    h("div", { class: "tl-error" }, err)
  );
}
function controls(p, cur, opts) {
  const bar = h("div", { class: "tl-bar" });
  const prev = h("button", { class: "tl-prev", type: "button" }, "◀ Prev");
  const next = h("button", { class: "tl-next", type: "button" }, "Next ▶");
  prev.disabled = cur <= 0;
  next.disabled = cur >= p.steps.length - 1;
  prev.addEventListener("click", () => opts.onSelect?.(cur - 1));
  next.addEventListener("click", () => opts.onSelect?.(cur + 1));
  bar.append(prev, next, h("span", { class: "tl-muted" }, `step ${cur} / ${p.steps.length - 1}`));
  if (opts.onRunTo) {
    const sel = h("select", { class: "tl-runto" }, h("option", { value: "" }, "run to…"));
    const names = [...new Set(pipelinePasses(p.pipeline).filter(Boolean))];
    for (const n of names) sel.append(h("option", { value: n }, n));
    sel.addEventListener("change", () => {
      if (sel.value) opts.onRunTo(sel.value);
    });
    bar.append(sel);
  }
  if (opts.onRerun) {
    const input = h("input", { class: "tl-pipeline", type: "text", spellcheck: "false" });
    input.value = p.pipeline;
    const btn = h("button", { class: "tl-rerun", type: "button" }, "Re-run");
    const go = () => opts.onRerun(input.value);
    btn.addEventListener("click", go);
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") go();
    });
    bar.append(input, btn);
  }
  return bar;
}
function stepTable(p, cur, opts) {
  const body = h("tbody");
  const anyError = p.steps.some((st) => st.error);
  for (const st of p.steps) {
    const vw = verificationWords(st.verification);
    const ver = h("span", { class: vw.cls, title: vw.title }, vw.text);
    const row = h(
      "tr",
      { class: st.index === cur ? "tl-step tl-current" : "tl-step", "data-index": st.index },
      h("td", { class: "tl-num" }, String(st.index)),
      h("td", {}, st.spec),
      h("td", { class: "tl-num" }, ms(st.seconds)),
      h("td", { class: "tl-num" }, `${st.symbols_before} → ${st.symbols_after}`),
      h("td", {}, ver),
      anyError ? h("td", { class: "tl-error" }, st.error ?? "") : null
    );
    row.addEventListener("click", () => opts.onSelect?.(st.index));
    body.append(row);
  }
  const heads = ["#", "pass", "ms", "symbols", "verified", ...anyError ? ["error"] : []];
  return h("div", { class: "tl-steps-wrap" }, h(
    "table",
    { class: "tl-steps" },
    h("thead", {}, h("tr", {}, ...heads.map((t) => h("th", {}, t)))),
    body
  ));
}
function diffView(diff) {
  const box = h("div", { class: "tl-diff" });
  if (!diff) {
    box.append(h("div", { class: "tl-ctx tl-muted" }, "(no changes)"));
    return box;
  }
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const k = classifyDiffLine(line);
    box.append(h("div", { class: k === "meta" ? "tl-meta-line" : `tl-${k}` }, line || " "));
  }
  return box;
}
var MARK_STROKE = { added: "#1a7f37", changed: "#bf8700" };
var COLLAPSE_ABOVE = 300;
function graphView(g, changes, opts = {}) {
  const collapseAbove = opts.collapseAbove ?? COLLAPSE_ABOVE;
  const wrap = h("div", { class: "tl-graph-view" });
  const canvas = h("div", { class: "tl-graph-wrap" });
  const wanted = opts.grouping ?? "auto";
  let grouping = wanted === "regions" ? { by: "regions" } : wanted === "none" ? { by: "none" } : wanted === "modules" && scopeDepth(g) ? { by: "modules", depth: defaultDepth(g) } : defaultGrouping(g);
  const collapsed = /* @__PURE__ */ new Set();
  const names = () => [...new Set(g.nodes.map((n) => groupOf(n, grouping)).filter((k) => !!k))];
  const collapseAll = () => {
    collapsed.clear();
    for (const k of names()) collapsed.add(k);
  };
  const marks = /* @__PURE__ */ new Map();
  for (const id of changes?.added ?? []) marks.set(id, "added");
  for (const id of changes?.changed ?? []) marks.set(id, "changed");
  const bar = h("div", { class: "tl-bar tl-graph-bar" });
  const bySel = h(
    "select",
    { class: "tl-group-by" },
    h("option", { value: "regions" }, "group: fusion regions"),
    h("option", { value: "modules" }, "group: modules"),
    h("option", { value: "none" }, "group: none")
  );
  const maxDepth = scopeDepth(g);
  if (!maxDepth) bySel.querySelector('option[value="modules"]').setAttribute("disabled", "");
  const depthSel = h("select", { class: "tl-depth", title: "module depth" });
  for (let d = 1; d <= maxDepth; d++) depthSel.append(h("option", { value: d }, `depth ${d}`));
  const collapseBtn = h("button", { class: "tl-collapse-all", type: "button" }, "collapse all");
  const expandBtn = h("button", { class: "tl-expand-all", type: "button" }, "expand all");
  const legend = h("span", { class: "tl-muted tl-changes" });
  if (changes) legend.append(`vs previous step: +${changes.added.length} added, ~${changes.changed.length} changed, −${changes.removed.length} removed`);
  bar.append(bySel, depthSel, collapseBtn, expandBtn, legend);
  const sync = () => {
    bySel.value = grouping.by;
    depthSel.style.display = grouping.by === "modules" ? "" : "none";
    if (grouping.by === "modules") depthSel.value = String(grouping.depth);
  };
  const regroup = (next) => {
    grouping = next;
    collapsed.clear();
    if (g.nodes.length > collapseAbove) collapseAll();
    sync();
    draw();
  };
  bySel.addEventListener("change", () => {
    const by = bySel.value;
    regroup(by === "modules" ? { by: "modules", depth: defaultDepth(g) } : by === "regions" ? { by: "regions" } : { by: "none" });
  });
  depthSel.addEventListener("change", () => regroup({ by: "modules", depth: Number(depthSel.value) }));
  collapseBtn.addEventListener("click", () => {
    collapseAll();
    draw();
  });
  expandBtn.addEventListener("click", () => {
    collapsed.clear();
    draw();
  });
  const draw = () => {
    const shown = collapseGroups(g, grouping, collapsed);
    const nodeMarks = new Map(marks);
    for (const n of g.nodes) {
      const k = groupOf(n, grouping);
      if (k && collapsed.has(k) && marks.has(n.id) && !nodeMarks.has(`group:${k}`)) nodeMarks.set(`group:${k}`, "changed");
    }
    const nodes = shown.nodes, edges = shown.edges;
    const lay = layoutGraph(shown);
    const svg = s("svg", { class: "tl-graph", xmlns: SVG, width: lay.width, height: lay.height, viewBox: `0 0 ${lay.width} ${lay.height}` });
    svg.append(s("defs", {}, s(
      "marker",
      { id: "tl-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" },
      s("path", { d: "M0,0 L8,4 L0,8 z", fill: "#888" })
    )));
    const groups = /* @__PURE__ */ new Map();
    for (const n of nodes) {
      const k = n.id.startsWith("group:") ? null : groupOf(n, grouping);
      if (k) {
        const pos = lay.positions.get(n.id);
        (groups.get(k) ?? groups.set(k, []).get(k)).push(pos);
      }
    }
    for (const [name, ps] of groups) {
      const x0 = Math.min(...ps.map((p) => p.x)) - 6, y0 = Math.min(...ps.map((p) => p.y)) - 14;
      const x1 = Math.max(...ps.map((p) => p.x)) + NODE_W + 6, y1 = Math.max(...ps.map((p) => p.y)) + NODE_H + 6;
      const box = s(
        "g",
        { class: "tl-group", "data-group": name },
        s("title", {}, `${name} (click to collapse)`),
        s("rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 6, fill: "rgba(120,120,200,0.05)", stroke: "#7a7ac0", "stroke-dasharray": "5,3" }),
        s("text", { x: x0 + 4, y: y0 + 10, fill: "#55559a" }, name)
      );
      box.addEventListener("click", () => {
        collapsed.add(name);
        draw();
      });
      svg.append(box);
    }
    for (const e of edges) {
      const a = lay.positions.get(e.src), b = lay.positions.get(e.dst);
      if (!a || !b) continue;
      const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y, my = (y1 + y2) / 2;
      svg.append(s(
        "path",
        { d: `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`, fill: "none", stroke: "#999", "stroke-width": 1.2, "marker-end": "url(#tl-arrow)" },
        s("title", {}, `${e.value}: ${e.type}`)
      ));
    }
    for (const n of nodes) {
      const p = lay.positions.get(n.id);
      const label = n.label.length > 22 ? n.label.slice(0, 21) + "…" : n.label;
      const mark = nodeMarks.get(n.id);
      const node = s(
        "g",
        { class: `tl-node tl-kind-${n.kind}${mark ? ` tl-mark-${mark}` : ""}`, "data-id": n.id },
        s("title", {}, [n.label, n.executor && `executor: ${n.executor}`, n.scope && `module: ${n.scope}`, n.source, mark && `${mark} by this step`].filter(Boolean).join("\n")),
        s("rect", {
          x: p.x,
          y: p.y,
          width: NODE_W,
          height: NODE_H,
          rx: n.kind === "call" || n.kind === "region" ? 4 : 13,
          fill: n.kind === "input" || n.kind === "output" ? "#eeeeee" : executorColor(n.executor),
          stroke: mark ? MARK_STROKE[mark] : "#666",
          "stroke-width": mark ? 2.5 : 1
        }),
        s("text", { x: p.x + NODE_W / 2, y: p.y + NODE_H / 2 + 4, "text-anchor": "middle" }, label)
      );
      if (n.id.startsWith("group:")) node.addEventListener("click", () => {
        collapsed.delete(n.id.slice(6));
        draw();
      });
      svg.append(node);
    }
    canvas.replaceChildren(svg);
  };
  regroup(grouping);
  wrap.append(bar, canvas);
  return wrap;
}
function tabs(labels, active, onPick) {
  const bar = h("div", { class: "tl-tabs" });
  for (const l of labels) {
    const b = h("button", { type: "button", class: l === active ? "tl-active" : "", "data-tab": l }, l);
    b.addEventListener("click", () => onPick(l));
    bar.append(b);
  }
  return bar;
}
var viewState = /* @__PURE__ */ new WeakMap();
var PANES = ["Program", "Diff", "Graph", "What it did", "Timings"];
function stepDetail(root, p, st) {
  const box = h("div", { class: "tl-detail" });
  const state = viewState.get(root) ?? { pane: "Program" };
  viewState.set(root, state);
  const paint = () => {
    box.replaceChildren();
    if (st.error) box.append(h("div", { class: "tl-error" }, `step ${st.index} (${st.spec}) failed: ${st.error}`));
    const traces = st.traces;
    const names = traces ? Object.keys(traces) : [];
    const trace = state.trace && names.includes(state.trace) ? state.trace : names[0];
    if (names.length) box.append(tabs(names, trace, (t2) => {
      state.trace = t2;
      paint();
    }));
    box.append(tabs(PANES, state.pane, (pn) => {
      state.pane = pn;
      paint();
    }));
    if (state.pane === "Timings") {
      box.append(stepTimingsView(p, st));
      return;
    }
    const labels = () => new Map((traces?.[trace]?.graph.nodes ?? []).map((n) => [n.id, n.label]));
    const select = (id) => selectionOf(root).selectNode(id, "notes");
    if (state.pane === "What it did") {
      box.append(notesView(p, st, labels(), select));
      return;
    }
    if (!traces) {
      box.append(h("div", { class: "tl-loading tl-muted" }, st.error ? "(no traces: the step failed)" : "loading…"));
      return;
    }
    const t = traces[trace];
    if (!t) {
      box.append(h("div", { class: "tl-muted" }, "(no traces)"));
      return;
    }
    box.append(h(
      "div",
      { class: "tl-muted" },
      `${trace}: ${t.stats.symbols} symbols, ${t.stats.regions} regions · ` + Object.entries(t.stats.executors).map(([k, v]) => `${k} ${v}`).join(", ")
    ));
    if (state.pane === "Program") box.append(programView(t, { selection: selectionOf(root) }));
    else if (state.pane === "Diff") box.append(stepDiff(root, p, st, trace, state, paint));
    else box.append(graphView(t.graph, t.changes));
  };
  paint();
  return box;
}
function stepDiff(root, p, st, trace, state, repaint) {
  const prev = [...p.steps].reverse().find((x) => x.index < st.index && x.traces)?.index;
  const other = state.against !== void 0 && state.against !== st.index && p.steps[state.against]?.traces ? state.against : prev;
  const sel = h("select", { class: "tl-diff-against", "aria-label": "compare with step" });
  for (const x of p.steps) if (x.index !== st.index && x.traces) sel.append(h("option", { value: x.index }, `vs step ${x.index}: ${x.spec}${x.index === prev ? " (previous)" : ""}`));
  const box = h("div", { class: "tl-diff-pane" }, sel);
  const a = other === void 0 ? void 0 : p.steps[other].traces?.[trace], b = st.traces?.[trace];
  if (other === void 0 || !b) {
    box.append(h("div", { class: "tl-muted" }, "(nothing to compare with: this is the first step)"));
    return box;
  }
  sel.value = String(other);
  sel.addEventListener("change", () => {
    state.against = Number(sel.value);
    repaint();
  });
  if (!a) box.append(h("div", { class: "tl-muted" }, `step ${other} has no ${trace} trace: every call is new`));
  if (b.calls && (!a || a.calls)) {
    box.append(callDiffView(a ?? { program: "", calls: [] }, b, {
      beforeName: `step ${other}: ${p.steps[other].spec}`,
      afterName: `step ${st.index}: ${st.spec}`,
      onSelect: (id) => selectionOf(root).selectNode(id, "diff"),
      regionExecutor: (r) => p.regions[r]?.executor ?? null
    }));
  } else box.append(diffView(other === prev ? b.diff : null));
  return box;
}
function renderRecord(root, payload, opts = {}) {
  const n = payload.steps.length;
  const cur = Math.max(0, Math.min(n - 1, opts.current ?? n - 1));
  root.classList.add("thunderlab");
  root.setAttribute("data-step", String(cur));
  const style = h("style", {}, CSS + STEP_CSS);
  const parts = [style, header(payload, opts), controls(payload, cur, opts), stepTable(payload, cur, opts)];
  if (n) parts.push(stepDetail(root, payload, payload.steps[cur]));
  root.replaceChildren(...parts);
}

// src/widget.ts
function render({ model, el }) {
  const paint = () => {
    const payload = model.get("payload");
    if (!payload || !Array.isArray(payload.steps)) {
      el.textContent = "thunderlab: no record yet";
      return;
    }
    renderRecord(el, payload, {
      current: Number(model.get("current") ?? 0),
      status: String(model.get("status") ?? ""),
      error: String(model.get("error") ?? ""),
      onSelect: (step) => model.send({ type: "goto", step }),
      onRunTo: (pass) => model.send({ type: "run_to", pass }),
      onRerun: (pipeline) => model.send({ type: "rerun", pipeline })
    });
  };
  const events = ["change:payload", "change:current", "change:status", "change:error"];
  for (const ev of events) model.on(ev, paint);
  paint();
  return () => {
    for (const ev of events) model.off?.(ev, paint);
  };
}
var widget_default = { render };
export {
  widget_default as default
};
