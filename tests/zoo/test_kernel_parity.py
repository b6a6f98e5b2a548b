"""benchmarks/kernel_parity.py: thunderlab's Inductor modules against torch.compile's, reduced to what runs."""
import re

import torch
import torch.nn as nn

import thunderlab
from benchmarks.kernel_parity import Capture, reduce_module, thunderlab_modules, verdict

INDUCTOR = "dce,cse,claim{executors=inductor+torch},fuse,del"


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return torch.softmax(self.b(torch.nn.functional.gelu(self.a(x))) * 2 + 1, dim=-1)


def _modules():
    torch.manual_seed(0)
    m = MLP().eval()
    x = torch.randn(4, 8)
    ours = thunderlab.jit(m, pipeline=INDUCTOR, tiered=False, race=False)
    capture = Capture()
    theirs = torch.compile(m, backend=capture)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), m(x))
        torch.testing.assert_close(theirs(x), m(x))
    return thunderlab_modules(ours), capture.modules


def test_a_forward_thunderlab_fuses_whole_gets_torch_compiles_kernels_and_a_change_shows():
    ours, theirs = _modules()
    assert len(ours) == len(theirs) == 1
    calls, kernels = reduce_module(ours[0])
    assert "addmm" in calls and any(c.startswith("kernel") for c in calls) and kernels
    out = verdict(ours, theirs)
    assert out["verdict"] == "same", out
    assert out["thunderlab"] == out["torch.compile"]
    src = theirs[0]
    # what only names or reorders is not a difference: another kernel name, a sum's terms swapped
    names = sorted(set(re.findall(r"\bcpp_fused_\w+", src)))
    renamed = src
    for i, n in enumerate(names):
        renamed = re.sub(rf"\b{n}\b", f"cpp_fused_other_{i}", renamed)
    swapped = re.sub(r"(auto tmp\d+ = )(tmp\d+) \+ (tmp\d+);", r"\1\3 + \2;", renamed)
    assert verdict([swapped], theirs)["verdict"] == "same"
    # a kernel that computes otherwise is
    changed = re.sub(r"(auto tmp\d+ = )(tmp\d+) \+ (tmp\d+);", r"\1\2 - \3;", src, count=1)
    assert changed != src
    out = verdict([changed], theirs)
    assert out["verdict"] == "same calls" and out["kernel_bodies_differing"] == 1
    # and so is a call more or less
    dropped = re.sub(r"\n\s+(?:\w+ = )?extern_kernels\.addmm\([^\n]*", "", src, count=1)
    assert dropped != src
    out = verdict([dropped], theirs)
    assert out["verdict"] == "different" and out["thunderlab"]["library_calls"] == out["torch.compile"][
        "library_calls"] - 1
