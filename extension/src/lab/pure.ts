// The sidebar's logic that needs no browser or JupyterLab: bundled alone for the node tests.
export { classify } from "./protocol";
export { moved, parsePipeline, printPipeline, PipelineModel, stepOf } from "./pipeline/model";
export { capturedTag, originTag, RecordsModel, visibleRows } from "./records/model";
export { StepModel } from "./step/model";
export { pairSteps, regionGroups, speedWords, TimingsModel, timingRows, totalCalls } from "./timings/model";
export { merged, SidebarMemory, STATE_ID } from "./memory";
export { readRecord, siblings } from "./document/model";
