"""thunderlab's captures skip TorchDynamo's tokenizing of source files for debug-log headers that are off
(``frontend.dynamo.lean_line_headers``); other backends' captures, and thunderlab's with the log on, keep it.

TorchDynamo records the function names it finds in ``torch._dynamo.funcname_cache.cache``, one entry per file it
tokenized: each test writes its function into a file of its own and looks for that file there.
"""
import importlib.util
import textwrap

import pytest
import torch
import torch._dynamo.funcname_cache as funcname_cache

import thunderlab
from thunderlab.frontend.dynamo import lean_line_headers

SOURCE = textwrap.dedent("""
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.lin(x)) * 2 + x.sin()
""")


def _module(tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Block(), str(path)


def test_in_place():
    assert lean_line_headers() is True  # this torch lays TorchDynamo out as the change expects


@pytest.mark.parametrize("how", ["jit", "backend"])
def test_thunderlab_capture_tokenizes_nothing(tmp_path, how):
    block, path = _module(tmp_path, f"lean_{how}")
    x = torch.randn(3, 4)
    run = thunderlab.jit(block) if how == "jit" else torch.compile(block, backend="thunderlab")
    torch.testing.assert_close(run(x), block(x))
    assert path not in funcname_cache.cache


def test_other_backends_keep_their_headers(tmp_path):
    block, path = _module(tmp_path, "lean_eager_backend")
    x = torch.randn(3, 4)
    torch.testing.assert_close(torch.compile(block, backend="eager")(x), block(x))
    assert funcname_cache.cache[path]  # TorchDynamo named this file's functions, as it always does


def test_log_on_keeps_the_function_names(tmp_path, caplog):
    block, path = _module(tmp_path, "lean_logged")
    x = torch.randn(3, 4)
    torch._logging.set_logs(trace_call=True)
    try:
        torch.testing.assert_close(thunderlab.jit(block)(x), block(x))
    finally:
        torch._logging.set_logs()
    assert "Block.forward" in funcname_cache.cache[path].values()
