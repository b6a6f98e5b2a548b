// What the record document viewer reads from a file and a folder, with no browser or JupyterLab needed.
import { checkPayload, type Payload, type Problem } from "../../payload";

export const FILE_TYPE = "thunderlab-record";
export const EXTENSION = ".thunderlab.json";
export const FACTORY = "thunderlab record";

/** What a saved record's text holds: the payload to draw, or what is wrong with it (the views' problems panel says it). */
export function readRecord(text: string): { payload: Payload } | { problems: Problem[] } {
  const notJson = (got: string) => ({ problems: [{ path: "", expected: "a thunderlab record as JSON text", got }] });
  if (!text.trim()) return notJson("an empty file (the record was not written out, or is still being written)");
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    return notJson(`text that is not JSON (${e instanceof Error ? e.message : String(e)}): it may have been cut short while written`);
  }
  const problems = checkPayload(data);
  return problems.length ? { problems } : { payload: data as Payload };
}

/** The records in a folder listing, in name order (the files THUNDERLAB_RECORDS writes sort by time). */
export function siblings(listing: { name: string; path: string; type: string }[]): string[] {
  return listing.filter((f) => f.type === "file" && f.name.endsWith(EXTENSION)).map((f) => f.path).sort();
}

export const DOC_CSS = `
.tl-doc { overflow: auto; padding: 8px 16px; background: var(--jp-layout-color0); color: var(--jp-ui-font-color1); }
.tl-doc-bar { display: flex; align-items: center; gap: 12px; padding: 4px 0 8px; border-bottom: 1px solid var(--jp-border-color2);
  margin-bottom: 8px; font-size: var(--jp-ui-font-size1); }
.tl-doc-where { margin-left: auto; color: var(--jp-ui-font-color2); }
`;
