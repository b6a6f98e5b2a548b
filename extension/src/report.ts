// Offline HTML report: renders the payload embedded in the page; stepping is local. A payload that is not
// JSON, or does not follow the schema, gets a panel in the page saying what is wrong (never a blank page).
import { renderRecord, showProblems } from "./record";

const CANNOT = "thunderlab cannot show this report";

function start(): void {
  const root = document.getElementById("thunderlab-root");
  const data = document.getElementById("thunderlab-payload");
  if (!root || !data) return;
  let payload: unknown;
  try {
    payload = JSON.parse(data.textContent ?? "");
  } catch (e) {
    showProblems(root, [{ path: "", expected: "a thunderlab record as JSON text", got: `text that is not JSON (${e instanceof Error ? e.message : String(e)})` }], CANNOT);
    return;
  }
  const show = (current: number): void => renderRecord(root, payload, { current, onSelect: show, cannot: CANNOT });
  show(Number.MAX_SAFE_INTEGER);  // the last step (renderRecord clamps)
}

/** Draw the page's record (the report calls this after the bundle; it waits for the page when still loading). */
export function startReport(): void {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
}
