"""A model whose code carries markup, for the report's escaping tests (`thunderlab report` convention)."""
import torch


class Evil(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x) * 2  # </script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">
        return torch.nn.functional.gelu(y) + x


def Evil_inputs():
    torch.manual_seed(0)
    return (torch.randn(4, 8),)


def plain(x, y):
    return (x * y).sin() + x * y


def example_inputs():
    return torch.randn(3), torch.randn(3)
