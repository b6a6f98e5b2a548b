// The one bundle of the views (thunderlab/inspect/static/views.js, built by build.mjs as a classic script
// that defines `thunderlabViews`): the report page loads it and calls thunderlabViews.startReport(); the
// notebook widget's module is the same text plus `export default thunderlabViews.widget` (anywidget wants
// an ES module whose default export has render). A classic script, not a module, because a report site's
// pages share one views.js file, and a browser will not load a module script from a file:// page.
export { startReport } from "./report";
export { widget } from "./widget";
