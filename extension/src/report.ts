// Offline HTML report: renders the payload embedded in the page; stepping is local.
import { payloadProblem, renderRecord, type Payload } from "./views";

function start(): void {
  const root = document.getElementById("thunderlab-root");
  const data = document.getElementById("thunderlab-payload");
  if (!root || !data) return;
  let payload: Payload;
  try {
    payload = JSON.parse(data.textContent ?? "") as Payload;
  } catch (e) {
    root.textContent = `thunderlab: cannot read the embedded record: ${String(e)}`;
    return;
  }
  const problem = payloadProblem(payload);
  if (problem) {
    root.textContent = `thunderlab cannot show this report: ${problem}.`;
    root.setAttribute("role", "alert");
    return;
  }
  const show = (current: number): void => renderRecord(root, payload, { current, onSelect: show });
  show(payload.steps.length - 1);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
