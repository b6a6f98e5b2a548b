"""thunderlab: a tracing compiler for PyTorch whose every pass is an inspectable step."""
from .api import (
    JitFunction,
    JitModule,
    NotLive,
    RecordFileError,
    bisect,
    clear_records,
    compare,
    jit,
    last_record,
    last_traces,
    load,
    profile,
    record_to,
    records,
    rerun,
    save,
    session,
    set_fast_paths,
    set_limits,
)
from .frontend.dynamo import register as _register_backend
from .passes import DEFAULT_PIPELINE, Pass, Pipeline, register_pass
from .version import __version__ as __version__

_register_backend()

__all__ = ["DEFAULT_PIPELINE", "JitFunction", "JitModule", "NotLive", "Pass", "Pipeline", "RecordFileError", "bisect",
           "clear_records", "compare", "jit", "last_record", "last_traces", "load", "profile", "record_to", "records",
           "register_pass", "rerun", "save", "session", "set_fast_paths", "set_limits"]


def _jupyter_labextension_paths() -> list[dict]:
    """Where the prebuilt JupyterLab extension lies in the package (for `jupyter-builder develop`)."""
    return [{"src": "jupyter/labextension", "dest": "thunderlab"}]


def load_ipython_extension(ipython) -> None:
    """``%load_ext thunderlab``: serve the JupyterLab sidebar from this kernel."""
    from .jupyter.comm import start

    start()


def _serve_sidebar() -> None:
    # inside a Jupyter kernel, importing thunderlab links it to the JupyterLab sidebar
    import sys

    if "ipykernel" in sys.modules:
        from .jupyter.comm import start

        try:
            start()
        except Exception as e:  # the compiler works without the sidebar
            import warnings

            warnings.warn(f"thunderlab: the JupyterLab sidebar link did not start: {e}", stacklevel=2)


_serve_sidebar()
