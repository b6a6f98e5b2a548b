"""The ways PyTorch's documentation lets a call name its arguments and sizes, each compared with eager.

A method that takes sizes takes them as separate numbers or as one sequence (``Tensor.permute(*dims)``,
``Tensor.view(*shape)``, ``Tensor.repeat(*repeats)``, ``Tensor.flip(dims)``), and the function and the method take
them by their documented keyword too (``torch.permute(input, dims)``, ``torch.reshape(input, shape)``,
``Tensor.expand(*sizes)`` as ``size=``, ``Tensor.new_ones(size)``). Every form a case writes is one eager accepts; the
compiled function must accept it as well and give eager's result, gradients included. The same holds for any
argument given by the name PyTorch's documentation gives it (``torch.matmul(input, other)``, ``Tensor.pow(exponent)``),
where thunderlab's own operators name their parameters otherwise.
"""
import pytest
import torch

from tests.semantics.harness import check


def _x():
    return (torch.randn(3, 2, requires_grad=True),)


CASES = {
    # Tensor.flip(dims) and torch.flip(input, dims): "dims (a list or tuple): axis to flip on"; the method also
    # takes the dims as separate numbers, as permute does
    "flip_method_one_int": lambda x: x.flip(0),
    "flip_method_ints": lambda x: x.flip(0, 1),
    "flip_method_tuple": lambda x: x.flip((1,)),
    "flip_method_keyword": lambda x: x.flip(dims=(0,)),
    "flip_function_keyword": lambda x: torch.flip(x, dims=(0, 1)),
    # torch.permute(input, dims) / Tensor.permute(*dims)
    "permute_function_keyword": lambda x: torch.permute(x, dims=(1, 0)),
    "permute_method_keyword": lambda x: x.permute(dims=(1, 0)),
    "permute_method_list": lambda x: x.permute([1, 0]),
    "permute_method_ints": lambda x: x.permute(1, 0),
    # torch.reshape(input, shape) / Tensor.reshape(*shape) / Tensor.view(*shape)
    "reshape_function_keyword": lambda x: torch.reshape(x, shape=(6,)),
    "reshape_method_keyword": lambda x: x.reshape(shape=(2, 3)),
    "view_method_keyword": lambda x: x.view(size=(6,)) * 2,
    "view_method_ints": lambda x: x.view(2, 3) * 2,
    # Tensor.expand(*sizes), Tensor.repeat(*repeats), torch.tile(input, dims) / Tensor.tile(dims)
    "expand_method_keyword": lambda x: x.expand(size=(2, 3, 2)) * 1,
    "repeat_method_keyword": lambda x: x.repeat(repeats=(2, 1)),
    "repeat_method_ints": lambda x: x.repeat(2, 1),
    "tile_function_keyword": lambda x: torch.tile(x, dims=(2,)),
    "tile_method_ints": lambda x: x.tile(2, 1),
    # Tensor.new_ones(size) / new_zeros(size): "size (int...): a list, tuple, or torch.Size of integers"
    "new_ones_keyword": lambda x: x + x.new_ones(size=(3, 2)),
    "new_zeros_ints": lambda x: x + x.new_zeros(3, 2),
    # sizes beside other keywords: the other keywords stay where they are
    "sum_dims_keyword": lambda x: x.sum(dim=(0, 1), keepdim=True),
    "roll_keywords": lambda x: torch.roll(x, shifts=1, dims=0),
    # arguments by their documented names: torch.matmul(input, other), torch.mm(input, mat2), torch.sum(input),
    # torch.abs(input), Tensor.pow(exponent), Tensor.sub(other, *, alpha=1), Tensor.split(split_size, dim=0)
    "matmul_keywords": lambda x: torch.matmul(input=x, other=x.T),
    "mm_keyword": lambda x: torch.mm(x, mat2=x.T),
    "sum_input_keyword": lambda x: torch.sum(input=x),
    "abs_input_keyword": lambda x: torch.abs(input=x),
    "pow_exponent_keyword": lambda x: x.pow(exponent=2),
    "sub_other_keyword": lambda x: x.sub(other=x * 3, alpha=0.5),
    "split_size_keyword": lambda x: x.split(split_size=1, dim=1)[1] * 2,
    # the in-place methods take the same names: Tensor.add_(other, *, alpha=1), Tensor.mul_(value),
    # Tensor.pow_(exponent), Tensor.div_(value, *, rounding_mode=None), Tensor.fill_(value),
    # Tensor.masked_fill_(mask, value); each writes into an intermediate (a leaf that requires grad cannot be)
    "add_inplace_keywords": lambda x: (x * 1).add_(other=x * 2, alpha=2),
    "mul_inplace_keyword": lambda x: (x * 1).mul_(other=3),
    "pow_inplace_keyword": lambda x: (x * 1).pow_(exponent=2),
    "div_inplace_keywords": lambda x: (x * 1).div_(other=2, rounding_mode="floor") + x,
    "fill_inplace_keyword": lambda x: (x * 1).fill_(value=2.0) + x,
    "masked_fill_inplace_keywords": lambda x: (x * 1).masked_fill_(mask=x > 0, value=0.5),
}


@pytest.mark.parametrize("name", CASES)
def test_a_documented_call_form_compiles_and_matches_eager(name):
    check(CASES[name], _x)
