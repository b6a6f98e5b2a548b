"""``PassDebugger``: an anywidget that steps through the passes of a compile record.

The view is the same TypeScript code as the static HTML report (``extension/src``); this
side keeps the record, answers the view's messages (go to a step, run to a pass, re-run an
edited pipeline) and sends each step's program, diff and graph only when it is shown.
"""
from __future__ import annotations

try:
    import anywidget
    import traitlets
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("thunderlab.widgets needs anywidget: pip install 'thunderlab[widgets]' "
                      f"(or pip install anywidget); importing it failed with: {e}") from e

from thunderlab.inspect.html import bundle_text
from thunderlab.inspect.record import CompileRecord
from thunderlab.inspect.serialize import RecordPayload


def widget_module() -> str:
    """The widget's ES module: the report's view bundle (a script defining ``thunderlabViews``) with the
    default export anywidget asks for. One bundle, so the widget and the report draw the same views."""
    return bundle_text() + "\nexport default thunderlabViews.widget;\n"


def _record_of(obj) -> CompileRecord:
    if isinstance(obj, CompileRecord):
        return obj
    from thunderlab.api import JitFunction, last_record

    if isinstance(obj, JitFunction):
        return last_record(obj)
    raise TypeError(f"PassDebugger shows a CompileRecord or a function made by thunderlab.jit, "
                    f"got {type(obj).__name__}")


class PassDebugger(anywidget.AnyWidget):
    """Step forward and back through a record's passes; edit the pipeline and re-run.

    ``PassDebugger(record)`` (or a jitted function, for its last record) opens at the last
    step. ``goto(i or pass name)``, ``forward()``, ``back()``, ``run_to(name)`` and
    ``rerun(pipeline)`` do from Python what the buttons do in the view.
    """

    _esm = widget_module()
    payload = traitlets.Dict().tag(sync=True)
    current = traitlets.Int(0).tag(sync=True)
    status = traitlets.Unicode("idle").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, record, step: int | str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.history: list[CompileRecord] = []  # every record shown, oldest first (re-runs append)
        self._show(_record_of(record))
        self.on_msg(self._on_msg)
        if step is not None:
            self.goto(step)

    @property
    def record(self) -> CompileRecord:
        return self.history[-1]

    def _show(self, record: CompileRecord) -> None:
        self.history.append(record)
        self._payload = RecordPayload(record)
        self._loaded: set[int] = set()
        self.error = record.error or ""
        last_ok = max((s.index for s in record.steps if s.program is not None), default=0)
        self.current = -1
        self.goto(last_ok)

    def _publish(self, i: int) -> None:
        self._loaded.add(i)
        summary = self._payload.summary()
        for k in self._loaded:
            summary["steps"][k]["traces"] = self._payload.traces(k)
        self.payload = summary

    def goto(self, step: int | str) -> int:
        """Show step ``step`` (an index, or the name of a pass: its first step); returns the index."""
        n = len(self.record.steps)
        if isinstance(step, str):
            names = [s.spec.split("{")[0] for s in self.record.steps]
            if step not in names:
                raise ValueError(f"no pass {step!r} in this record; its steps: {', '.join(names)}")
            step = names.index(step)
        if not isinstance(step, int) or not 0 <= step < n:
            raise ValueError(f"step {step!r} out of range: this record has steps 0..{n - 1}")
        self._publish(step)
        self.current = step
        return step

    def forward(self) -> int:
        return self.goto(min(self.current + 1, len(self.record.steps) - 1))

    def back(self) -> int:
        return self.goto(max(self.current - 1, 0))

    def run_to(self, name: str) -> int:
        """Step forward from the current step to the next step of pass ``name``."""
        names = [s.spec.split("{")[0] for s in self.record.steps]
        for i in range(self.current + 1, len(names)):
            if names[i] == name:
                return self.goto(i)
        return self.goto(name)

    def rerun(self, pipeline: str) -> CompileRecord:
        """Re-run with an edited pipeline (reusing the unchanged prefix) and show the new record."""
        from thunderlab.passes import Pipeline
        from thunderlab.runtime.compiled import rerun, reusable_prefix

        try:
            parsed = Pipeline.parse(pipeline)
        except ValueError as e:
            self.error = str(e)
            raise
        total = len(parsed.enabled())
        self.status = f"re-running from pass {reusable_prefix(self.record, parsed) + 1} of {total}"

        def progress(step):
            self.status = f"ran pass {step.index} of {total}: {step.spec}"

        try:
            new = rerun(self.record, str(parsed), observer=progress)
        finally:
            self.status = "idle"
        self._show(new)
        return new

    def _on_msg(self, _widget, content, _buffers) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        try:
            if kind == "goto":
                self.goto(int(content["step"]))
            elif kind == "run_to":
                self.run_to(str(content["pass"]))
            elif kind == "rerun":
                self.rerun(str(content["pipeline"]))
            else:
                self.error = f"unknown message {kind!r}; expected goto, run_to or rerun"
        except Exception as e:  # shown in the view; the kernel keeps running
            self.error = f"{type(e).__name__}: {e}"
