// JSON files the bundlers (esbuild, webpack) inline; typed loosely here, checked where they are read.
declare module "*.json" {
  const value: unknown;
  export default value;
}
