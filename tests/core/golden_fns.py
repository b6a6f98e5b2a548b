"""Small functions whose printed traces are golden-tested. Edit with care: line numbers are in the goldens."""
import torch
import torch.nn.functional as F


def mlp_layer(x, w, b):
    return F.gelu(F.linear(x, w, b))


def duplicated(x):
    a = torch.sin(x) * 2
    b = torch.sin(x) * 2
    unused = torch.cos(x)  # noqa: F841
    return a + b


def norm_softmax(x, w, b):
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    return torch.softmax(y, dim=-1), y.sum(dim=0)


GOLDEN_CASES = {
    "mlp_layer": (mlp_layer, lambda: (torch.randn(2, 8), torch.randn(4, 8), torch.randn(4))),
    "duplicated": (duplicated, lambda: (torch.randn(3, 5),)),
    "norm_softmax": (norm_softmax, lambda: (torch.randn(2, 6), torch.randn(6), torch.randn(6))),
}
