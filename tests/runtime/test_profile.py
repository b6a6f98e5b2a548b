"""Kernel-level profiles: the fused kernels a record's own compiled program runs, kept on the record."""
import jsonschema
import pytest
import torch

import thunderlab
from tests.executors.test_fusion import INDUCTOR, PIPE
from thunderlab.inspect.serialize import RecordPayload, validate
from thunderlab.runtime.profile import profile_record


def f(x, w):
    a = torch.sin(x) * 2 + 1
    return torch.tanh(a @ w) * torch.cos(a).sum()


def test_profiling_a_record_runs_its_fused_inductor_kernels_and_a_rerun_its_own():
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    j = thunderlab.jit(f, pipeline=INDUCTOR)  # tiered: the first call runs torch, Inductor compiles after
    with torch.no_grad():
        j(x, w)
    rec = thunderlab.last_record(j)
    kernels = profile_record(rec)  # waits for the fused kernels, then profiles one call of the record's program
    [region] = rec.regions
    names = [k["name"] for k in kernels[region]]
    assert any("cpp_fused" in n for n in names), names  # Inductor's C++ kernels, not eager's aten ops
    assert not any(n in ("aten::sin", "aten::cos", "aten::tanh") for n in names), names
    assert rec.kernels is kernels
    # a re-run without fuse has no region: its own program runs the ops one by one
    plain = thunderlab.rerun(rec, "dce,cse,claim{executors=inductor+torch},del")
    unfused = profile_record(plain)
    assert set(unfused) == {"(outside regions)"}
    assert {"aten::sin", "aten::cos", "aten::tanh"} <= {k["name"] for k in unfused["(outside regions)"]}
    assert rec.kernels is kernels  # each record keeps its own


def test_thunderlab_profile_keeps_each_records_share_and_the_payload_carries_it():
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    j = thunderlab.jit(f, pipeline=PIPE, tiered=False)
    j(x, w)
    rec = thunderlab.last_record(j)
    assert RecordPayload(rec).summary()["kernels"] is None
    merged = thunderlab.profile(j, x, w)
    assert rec.kernels is not None and set(rec.kernels) <= set(merged)
    assert "aten::sin" in {k["name"] for k in rec.kernels["testfuse0"]}
    payload = RecordPayload(rec).summary()
    assert payload["kernels"]["testfuse0"] == rec.kernels["testfuse0"]
    validate(payload)
    # a payload written before profiles were kept (no "kernels") still reads
    older = {k: v for k, v in payload.items() if k != "kernels"}
    validate(older)
    bad = {**payload, "kernels": {"testfuse0": [{"name": "aten::sin", "count": "1"}]}}
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def test_thunderlabs_own_operators_are_kernels_of_the_region_that_calls_them_not_regions():
    # the gemm pass puts linear layers on thunderlab::onednn_linear where oneDNN wins on this CPU: the profiler names
    # that operator's events "thunderlab::onednn_linear", and the profile files it as a kernel of its region
    import thunderlab.executors.gemm  # noqa: F401  (defines the thunderlab:: operators)
    from thunderlab.executors.region import REGION_MARK
    from thunderlab.runtime.compiled import RECORD_MARK
    from thunderlab.runtime.profile import profile_records

    x, w, b = torch.randn(8, 16), torch.randn(32, 16), torch.randn(32)

    def program():
        with torch.profiler.record_function(f"{RECORD_MARK}7"):
            with torch.profiler.record_function(f"{REGION_MARK}inductor0"):
                return torch.ops.thunderlab.onednn_linear_strided(x, w, b)

    out, by_record = profile_records(program)
    torch.testing.assert_close(out, torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-5)
    assert set(by_record) == {7} and set(by_record[7]) == {"inductor0"}, by_record
    assert "thunderlab::onednn_linear_strided" in {k["name"] for k in by_record[7]["inductor0"]}
