// The shape of extension/src, read from its import statements (the layers are written down at the top of
// src/panes/registry.ts): no import circle, no module importing from a layer above its own, the pane registry
// (src/panes/index.ts) being what panes.mjs generates from the pane files, and every host of the step page
// drawing it from that registry.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { generate } from "../panes.mjs";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "..", "src");

// bottom to top; a file belongs to the first entry that names it or a folder above it
export const LAYERS = [
  ["bottom", ["payload.ts", "dom.ts", "selection.ts", "textdiff.ts", "json.d.ts"]],
  ["leaves", ["calldiff.ts", "kernels.ts", "communication.ts", "race.ts", "stepinfo.ts", "graph/"]],
  ["panes", ["panes/"]],
  ["pages", ["record.ts", "lab/"]],
  ["entries", ["report.ts", "widget.ts", "views.ts"]],
];

function files(dir = SRC) {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : n.endsWith(".ts") ? [relative(SRC, p).split("\\").join("/")] : [];
  });
}

// `import … from "x"`, `import type … from "x"`, `export … from "x"`, `import "x"` (clauses may span lines)
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:[\w$*{}\s,]+?\s+from\s+)?["']([^"']+)["']/g;

/** The modules of src that `text` (the file `file`) imports, as paths relative to src. */
export function importsOf(file, text) {
  const out = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1];
    if (!spec.startsWith(".")) continue;  // a package
    const base = resolve(SRC, dirname(file), spec);
    const found = [`${base}.ts`, join(base, "index.ts")].find((p) => existsSync(p));
    if (found) out.push(relative(SRC, found).split("\\").join("/"));
    else if (!spec.endsWith(".json")) throw new Error(`${file} imports ${spec}, which is no file of src`);
  }
  return out;
}

export function graphOf(sources) {
  return new Map(Object.entries(sources).map(([f, text]) => [f, importsOf(f, text)]));
}

/** The first import circle found, as the files along it (the first repeated at the end), or null. */
export function findCircle(graph) {
  const state = new Map();  // 1: on the path, 2: done
  const path = [];
  const visit = (f) => {
    if (state.get(f) === 2) return null;
    if (state.get(f) === 1) return [...path.slice(path.indexOf(f)), f];
    state.set(f, 1);
    path.push(f);
    for (const g of graph.get(f) ?? []) { const c = visit(g); if (c) return c; }
    path.pop();
    state.set(f, 2);
    return null;
  };
  for (const f of graph.keys()) { const c = visit(f); if (c) return c; }
  return null;
}

export function layerOf(file) {
  const i = LAYERS.findIndex(([, names]) => names.some((n) => (n.endsWith("/") ? file.startsWith(n) : file === n)));
  return i;
}

const read = () => Object.fromEntries(files().map((f) => [f, readFileSync(join(SRC, f), "utf8")]));

test("the import statements are read, multi-line and type-only ones included", () => {
  const g = graphOf({ "graph/view.ts": 'import { h } from "../dom";\nimport {\n  a, b,\n  type C,\n} from "./model";\nimport type { P } from "../payload";\nexport { x } from "./layout";\nexport const S = "./kernels";\nimport X from "../../thunderlab/inspect/schema/record-v1.json";\n' });
  assert.deepEqual(g.get("graph/view.ts"), ["dom.ts", "graph/model.ts", "payload.ts", "graph/layout.ts"]);
});

test("a circle is found, and a graph without one passes", () => {
  assert.deepEqual(findCircle(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]]])), ["a", "b", "c", "a"]);
  assert.equal(findCircle(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]])), null);
});

test("no import circle in extension/src", () => {
  const circle = findCircle(graphOf(read()));
  assert.equal(circle, null, `import circle: ${circle?.join(" -> ")}`);
});

test("every module sits in a layer and imports only from its own layer or those below; the bottom imports nothing", () => {
  const graph = graphOf(read());
  for (const [f, deps] of graph) {
    const mine = layerOf(f);
    assert.ok(mine >= 0, `${f} is in no layer: add it to LAYERS here and to the comment atop src/panes/registry.ts`);
    for (const d of deps) {
      const theirs = layerOf(d);
      assert.ok(theirs <= mine, `${f} (${LAYERS[mine][0]}) imports ${d} (${LAYERS[theirs][0]}), a layer above it`);
      if (mine === 0) assert.fail(`${f} is at the bottom and imports ${d}`);
      if (d.startsWith("lab/")) assert.ok(f.startsWith("lab/"), `${f} imports ${d}: only the sidebar's modules import lab/`);
    }
  }
});

test("the committed pane registry (src/panes/index.ts) is what panes.mjs generates from the pane files", () => {
  const committed = readFileSync(join(SRC, "panes/index.ts"), "utf8");
  assert.ok(committed.startsWith("// generated by panes.mjs — do not edit"), "src/panes/index.ts lost its header");
  assert.equal(committed, generate(), "src/panes/index.ts is stale: run `node panes.mjs` in extension/ (any npm script does)");
});

test("panes.mjs lists the pane files in tab order (order, then file name) and names a file that breaks the rule", () => {
  const dir = mkdtempSync(join(tmpdir(), "tl-panes-"));
  const pane = (name, order) => `import type { Pane } from "./registry";\nexport const ${name}: Pane = {\n  id: "${name}",\n  title: "T",\n` +
    `  order: ${order},\n  needsTrace: false,\n  render: () => document.createElement("div"),\n};\n`;
  try {
    writeFileSync(join(dir, "registry.ts"), "export interface Pane { order: number }\n");
    writeFileSync(join(dir, "zed.ts"), pane("zedPane", 5));
    writeFileSync(join(dir, "beta.ts"), pane("betaPane", 20));
    writeFileSync(join(dir, "alpha.ts"), pane("alphaPane", 20));
    writeFileSync(join(dir, "first.ts"), pane("firstPane", -1.5));
    const out = generate(dir);
    assert.match(out, /PANES: readonly Pane\[\] = \[firstPane, zedPane, alphaPane, betaPane\];/);
    assert.equal(out, generate(dir), "two runs differ");
    const imports = [...out.matchAll(/^import .* from "\.\/(\w+)";$/gm)].map((m) => m[1]);
    assert.deepEqual(imports, ["alpha", "beta", "first", "registry", "zed"]);
    writeFileSync(join(dir, "helper.ts"), "export const x = 1;\n");
    assert.throws(() => generate(dir), /src\/panes\/helper\.ts: a pane file exports exactly one .*found 0/);
    writeFileSync(join(dir, "helper.ts"), pane("helperPane", "N").replace("  order: N,\n", ""));
    assert.throws(() => generate(dir), /src\/panes\/helper\.ts: the pane helperPane needs one `order: <number>` line.*found none/);
    writeFileSync(join(dir, "helper.ts"), pane("helperPane", "LATER"));
    assert.throws(() => generate(dir), /found order: LATER/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("every host of the step page draws the registry's panes", () => {
  const src = read();
  const paneFiles = Object.keys(src).filter((f) => f.startsWith("panes/") && !["panes/index.ts", "panes/registry.ts"].includes(f));
  assert.ok(paneFiles.length >= 5, paneFiles.join(", "));
  const titles = paneFiles.map((f) => /\btitle: "([^"]+)"/.exec(src[f])[1]);
  // the step page's hosts: the record page (report, widget, document viewer) and the sidebar's step panel
  const paneViews = /\b(programView|notesView|stepTimingsView|graphView|callDiffView|diffView)\b/;
  for (const host of ["record.ts", "lab/step/panel.ts"]) {
    assert.ok(graphOf(src).get(host).includes("panes/index.ts"), `${host} does not import the pane registry`);
    assert.match(src[host], /for \(const \w+ of PANES\)|PANES\.map\(/, `${host} does not make its tabs from PANES`);
    assert.match(src[host], /renderPane\(/, `${host} does not draw the pane through renderPane`);
    assert.doesNotMatch(src[host], paneViews, `${host} draws a pane's view itself`);
    for (const t of titles) assert.ok(!src[host].includes(`"${t}"`), `${host} names the pane "${t}" itself`);
  }
  for (const host of ["report.ts", "widget.ts", "lab/document/viewer.ts"]) {
    assert.match(src[host], /import \{[^}]*\brenderRecord\b[^}]*\} from "[./]*record"/, `${host} does not draw through the record page`);
    assert.doesNotMatch(src[host], paneViews, `${host} draws a pane's view itself`);
  }
});
