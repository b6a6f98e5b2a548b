"""thunderlab: a tracing compiler for PyTorch whose every pass is an inspectable step."""
from .api import JitFunction, clear_records, jit, last_record, last_traces, profile, records, rerun, set_limits
from .frontend.dynamo import register as _register_backend
from .passes import DEFAULT_PIPELINE, Pass, Pipeline, register_pass

_register_backend()

__version__ = "0.1.0"
__all__ = ["DEFAULT_PIPELINE", "JitFunction", "Pass", "Pipeline", "clear_records", "jit", "last_record", "last_traces",
           "profile", "records", "register_pass", "rerun", "set_limits"]
