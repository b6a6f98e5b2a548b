// Bundles the views with esbuild. Output is deterministic: no timestamps, no source maps.
//   node build.mjs          -> the one shipped bundle, thunderlab/inspect/static/views.js (the report page and
//                              the notebook widget both load it; see src/views.ts)
//   node build.mjs --test   -> build-test/*.mjs, the pure helpers for node --test
// (the JupyterLab extension itself is built by `npm run build:lab`: tsc, then jupyter-builder; every npm script
// first regenerates the pane list, src/panes/index.ts, with panes.mjs)
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..", "thunderlab");
const common = { bundle: true, target: "es2020", charset: "utf8", legalComments: "none", logLevel: "warning" };

if (process.argv.includes("--test")) {
  await build({ ...common, entryPoints: [resolve(here, "src/graph/pure.ts")], format: "esm", platform: "neutral",
    outfile: resolve(here, "build-test/graph.mjs") });
  for (const name of ["payload", "calldiff", "stepinfo", "selection", "kernels", "record", "textdiff", "communication", "race"]) {
    await build({ ...common, entryPoints: [resolve(here, `src/${name}.ts`)], format: "esm", platform: "neutral",
      outfile: resolve(here, `build-test/${name}.mjs`) });
  }
  await build({ ...common, entryPoints: [resolve(here, "src/lab/pure.ts")], format: "esm", platform: "node", packages: "external",
    outfile: resolve(here, "build-test/lab.mjs") });
} else {
  await build({ ...common, entryPoints: [resolve(here, "src/views.ts")], format: "iife", globalName: "thunderlabViews", platform: "browser",
    outfile: resolve(pkg, "inspect/static/views.js") });
}
