"""verify=True compares each dtype with the tolerance torch.testing.assert_close gives it: a bfloat16 or
float16 model is not reported as wrong for rounding eager does differently, and a real error still is."""
import torch

import thunderlab
from thunderlab.passes.verification import compare, tolerances


class Block(torch.nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.fc = torch.nn.Linear(d, d)
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        return torch.nn.functional.gelu(self.ln(self.fc(x))) * 2 + 1


def test_a_bfloat16_model_verifies_with_bfloat16_tolerances():
    torch.manual_seed(0)
    model = Block().to(torch.bfloat16)
    x = torch.randn(8, 16, 64, dtype=torch.bfloat16)
    # the decomposed program computes in bfloat16 step by step, where eager's kernels keep float32 inside
    j = thunderlab.jit(model, verify=True, pipeline="dce,cse,claim{decompose=all},del")
    with torch.no_grad():
        out = j(x)
        ref = model(x)
    rec = thunderlab.last_record(j)
    assert all(s.verification.ok for s in rec.steps), rec.table()
    claim = rec.steps[3]
    assert claim.verification.max_error > 0  # the decomposed program does round differently...
    torch.testing.assert_close(out, ref)  # ...within what assert_close allows bfloat16
    assert not compare(out, ref, rtol=1e-4, atol=1e-5)[0]  # a float32 tolerance would call it wrong


def test_tolerances_follow_assert_close_and_still_catch_errors():
    assert tolerances(torch.bfloat16) == (1.6e-2, 1e-5)
    assert tolerances(torch.float16) == (1e-3, 1e-5)
    assert tolerances(torch.float32) == (1e-4, 1e-5)  # never tighter than the float32 floor
    y = torch.randn(100, dtype=torch.bfloat16)
    near = (y.float() * (1 + 2 ** -7)).bfloat16()  # one or two bfloat16 ulps away
    assert compare(near, y)[0]
    assert not compare(y * 1.1, y)[0]  # ten per cent is an error in any dtype
    assert not compare(near.float(), y.float())[0]  # the same change in float32 is one
