"""Proxies: the values a trace computes with, carrying metadata but no data."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

_DTYPE_SHORT = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128",
}


def dtype_short(dtype: torch.dtype) -> str:
    """The compact dtype name used in printed traces (f32, i64, ...)."""
    return _DTYPE_SHORT.get(dtype, str(dtype).replace("torch.", ""))


# The IR's many small values have slots, not an instance __dict__: a record keeps every step's
# program for as long as its function lives, and a dict per value would be most of its memory.
@dataclass(frozen=True, eq=False, slots=True)
class TensorProxy:
    """A tensor in a trace: a name plus shape, dtype, device and requires_grad.

    Proxies compare by identity; the name is unique within the trace that made it.
    """

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool = False
    # an input that is a module's parameter (nn.Parameter): the state data-parallel passes keep in sync
    parameter: bool = False
    # the printed type, made on first use (a proxy never changes; views print its type many times)
    _type: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        return self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def type_string(self) -> str:
        """`cpu f32[4, 64]`: the per-value comment of a printed trace."""
        if self._type is None:
            dims = ", ".join(str(s) for s in self.shape)
            object.__setattr__(self, "_type", f"{self.device.type} {dtype_short(self.dtype)}[{dims}]")
        return self._type

    def meta_tensor(self) -> torch.Tensor:
        """An empty tensor on the meta device with this proxy's shape and dtype."""
        return torch.empty(self.shape, dtype=self.dtype, device="meta")

    def __repr__(self) -> str:
        return f"<{self.name}: {self.type_string()}>"


def is_proxy(x) -> bool:
    return isinstance(x, TensorProxy)


@dataclass(frozen=True, eq=False, slots=True)
class ScalarInput:
    """A non-tensor input (e.g. a symbolic size from Dynamo), specialized to ``value``."""

    name: str
    value: Any

    def type_string(self) -> str:
        return f"{type(self.value).__name__} = {self.value!r}"
