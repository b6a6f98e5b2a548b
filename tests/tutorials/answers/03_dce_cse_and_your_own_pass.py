# Reference answers for tutorials/03_dce_cse_and_your_own_pass.ipynb (see tests/tutorials/fill.py).

# %% exercise-03.1
def my_dce(trace):
    live = {p.name for p in trace.output_proxies()}
    kept = []
    for call in reversed(trace.bound_symbols):
        if call.side_effect or any(p.name in live for p in call.outputs):
            kept.append(call)
            live.update(p.name for p in call.inputs)
    return trace.derive(bound_symbols=kept[::-1])

# %% exercise-03.2
def my_cse(trace):
    seen, rename, kept = {}, {}, []
    for call in trace.bound_symbols:
        call = call.swap(rename)
        if call.random or call.side_effect or not call.outputs:
            kept.append(call)
            continue
        key = (call.sym.qualname, repr(call.args), repr(call.kwargs))
        if key in seen:
            for new, old in zip(call.outputs, seen[key].outputs):
                rename[new.name] = old
            continue
        seen[key] = call
        kept.append(call)
    output = tuple(rename.get(p.name, p) for p in trace.output)
    return trace.derive(bound_symbols=kept, output=output)

# %% exercise-03.3
def drop_mul_by_one(trace):
    from thunderlab.core.proxies import TensorProxy

    rename, kept = {}, []
    for call in trace.bound_symbols:
        call = call.swap(rename)
        if call.sym is ltorch.mul and len(call.args) == 2 and len(call.outputs) == 1:
            tensors = [a for a in call.args if isinstance(a, TensorProxy)]
            numbers = [a for a in call.args if not isinstance(a, TensorProxy)]
            out = call.outputs[0]
            if (len(tensors) == 1 and numbers == [1] and tensors[0].dtype == out.dtype
                    and tensors[0].shape == out.shape):
                rename[out.name] = tensors[0]
                continue
        kept.append(call)
    output = tuple(rename.get(p.name, p) for p in trace.output)
    return trace.derive(bound_symbols=kept, output=output)

# %% exercise-03.4
pipeline = "dce,cse,mul-by-one,claim,del"
