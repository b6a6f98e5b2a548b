// The graph view's pure parts, bundled for node --test (build.mjs --test).
export * from "./layout";
export * from "./model";
export * from "./groups";
