"""Passes: Program -> Program steps, their registry, pipelines and the runner."""
from . import autodiff, claim, cse, dce, ddp, del_, fsdp, fuse, layout, remat, sink_waits  # noqa: F401  (each registers its pass)
from .base import REGISTRY, Decline, Notes, Pass, PassSpec, Pipeline, PipelineError, register_pass
from .runner import run_pipeline

DEFAULT_PIPELINE = "dce,cse,channels-last,autodiff,remat,claim,fuse,del"

__all__ = ["DEFAULT_PIPELINE", "REGISTRY", "Decline", "Notes", "Pass", "PassSpec", "Pipeline", "PipelineError",
           "register_pass", "run_pipeline"]
