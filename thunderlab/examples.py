"""Small real models that thunderlab's demo, tests and benchmarks compile."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "MLP",
    "CausalSelfAttention",
    "NanoGPTMLP",
    "NanoGPTBlock",
    "RMSNorm",
    "LlamaAttention",
    "LlamaMLP",
    "LlamaBlock",
    "SmallCNN",
    "gpt2_from_config",
    "EXAMPLES",
]


# --------------------------------------------------------------------------- MLP


class MLP(nn.Module):
    """Linear -> GELU -> Linear -> ReLU -> Linear."""

    def __init__(self, in_features: int = 64, hidden: int = 128, hidden2: int = 128, out_features: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.act1 = nn.GELU()
        self.fc2 = nn.Linear(hidden, hidden2)
        self.act2 = nn.ReLU()
        self.fc3 = nn.Linear(hidden2, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


# ----------------------------------------------------------------------- nanoGPT


class CausalSelfAttention(nn.Module):
    """nanoGPT-style multi-head causal self-attention."""

    def __init__(
        self, n_embd: int = 256, n_head: int = 4, block_size: int = 64, dropout: float = 0.0, bias: bool = True
    ):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_embd = n_embd
        self.n_head = n_head
        self.block_size = block_size
        self.dropout = dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class NanoGPTMLP(nn.Module):
    """c_fc -> GELU(tanh) -> c_proj."""

    def __init__(self, n_embd: int = 256, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class NanoGPTBlock(nn.Module):
    """x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))."""

    def __init__(
        self, n_embd: int = 256, n_head: int = 4, block_size: int = 64, dropout: float = 0.0, bias: bool = True
    ):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd, bias=bias)
        self.mlp = NanoGPTMLP(n_embd, dropout, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


# ------------------------------------------------------------------------- Llama


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    d = x.shape[-1]
    x1 = x[..., : d // 2]
    x2 = x[..., d // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + rotate_half(x) * sin


class LlamaAttention(nn.Module):
    def __init__(self, dim: int = 256, n_heads: int = 4, max_seq: int = 64, rope_base: float = 10000.0):
        super().__init__()
        assert dim % n_heads == 0
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        t = torch.arange(max_seq, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)  # (max_seq, head_dim)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        cos = self.cos_cached[:T]
        sin = self.sin_cached[:T]
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int = 256, hidden: int = 688):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaBlock(nn.Module):
    def __init__(self, dim: int = 256, n_heads: int = 4, hidden: int = 688, max_seq: int = 64, eps: float = 1e-6):
        super().__init__()
        self.attn_norm = RMSNorm(dim, eps)
        self.attn = LlamaAttention(dim, n_heads, max_seq)
        self.mlp_norm = RMSNorm(dim, eps)
        self.mlp = LlamaMLP(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        x = x + self.mlp(self.mlp_norm(x))
        return x


# --------------------------------------------------------------------------- CNN


class SmallCNN(nn.Module):
    """Two conv/BN/ReLU stages for 3x32x32 inputs, 10 classes."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool2 = nn.AvgPool2d(2)
        self.fc = nn.Linear(32 * 8 * 8, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool2(F.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        return self.fc(x)


# -------------------------------------------------------------------------- GPT-2


def gpt2_from_config(n_layer: int = 2, n_embd: int = 64, n_head: int = 4, n_positions: int = 64,
                     vocab_size: int = 128, seed: int = 0) -> nn.Module:
    """A randomly initialised Hugging Face GPT2LMHeadModel (nothing is downloaded)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    kwargs = dict(
        n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=n_positions, vocab_size=vocab_size,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1,
    )
    try:
        config = GPT2Config(attn_implementation="eager", **kwargs)
    except TypeError:
        config = GPT2Config(**kwargs)
    if getattr(config, "_attn_implementation", "eager") != "eager":
        try:
            config._attn_implementation = "eager"
        except Exception:
            pass
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config)
    model.eval()
    return model


# ---------------------------------------------------------------------- registry


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mlp(seed: int = 0):
    torch.manual_seed(seed)
    model = MLP().eval()
    return model, (torch.randn(8, 64, generator=_gen(seed + 1)),)


def _nanogpt_block(seed: int = 0):
    torch.manual_seed(seed)
    model = NanoGPTBlock().eval()
    return model, (torch.randn(4, 64, 256, generator=_gen(seed + 1)),)


def _llama_block(seed: int = 0):
    torch.manual_seed(seed)
    model = LlamaBlock().eval()
    return model, (torch.randn(2, 32, 256, generator=_gen(seed + 1)),)


def _cnn(seed: int = 0):
    # Returned in eval(); call model.train() to exercise BatchNorm batch statistics.
    torch.manual_seed(seed)
    model = SmallCNN().eval()
    return model, (torch.randn(2, 3, 32, 32, generator=_gen(seed + 1)),)


def _gpt2(seed: int = 0):
    model = gpt2_from_config(seed=seed)
    return model, (torch.randint(0, 128, (2, 16), generator=_gen(seed + 1)),)


EXAMPLES: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    "mlp": _mlp,
    "nanogpt_block": _nanogpt_block,
    "llama_block": _llama_block,
    "cnn": _cnn,
    "gpt2": _gpt2,
}
