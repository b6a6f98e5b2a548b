# Reference answers for tutorials/07_debugging_a_broken_pass.ipynb (see tests/tutorials/fill.py).

# %% exercise-07.1
def first_wrong_call(before, after, inputs):
    def values(trace):
        calls = [c for c in trace.bound_symbols if len(c.outputs) == 1]
        outs = trace.derive(output=tuple(c.outputs[0] for c in calls)).callable()(*inputs)
        return {c.id: v for c, v in zip(calls, outs)}

    old, new = values(before), values(after)
    for call in after.bound_symbols:
        if call.id in old and call.id in new and not torch.allclose(old[call.id], new[call.id]):
            return call
    return None

# %% exercise-07.2
def fixed_strength_reduce(trace):
    out = []
    for call in trace.bound_symbols:
        if call.sym is ltorch.div and len(call.args) == 2:
            a, c = call.args
            if isinstance(a, TensorProxy) and isinstance(c, (int, float)) and c != 0:
                call = call.replace(sym=ltorch.mul, args=(a, 1 / c))
        out.append(call)
    return trace.derive(bound_symbols=out)

# %% exercise-07.3
@thunderlab.register_pass
@dataclasses.dataclass(frozen=True)
class StrengthReduce(thunderlab.Pass):
    """Replace division by a constant with multiplication by its reciprocal."""

    name = "strength-reduce"

    def __call__(self, program):
        return program.map(fixed_strength_reduce)


fixed_record = thunderlab.rerun(record)
