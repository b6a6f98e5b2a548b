# Reference answers for tutorials/05_autodiff_and_remat.ipynb (see tests/tutorials/fill.py).

# %% exercise-05.1
def forward_call_of(record, name):
    backward = record.program.traces["backward"]
    call = next(c for c in backward.bound_symbols if any(p.name == name for p in c.outputs))
    return next(c for c in record.program.traces["forward"].bound_symbols if c.id == call.derived_from)

# %% exercise-05.2
def grad_w(x, w):
    h = torch.tanh(x @ w)
    return x.T @ (2 * h * (1 - h * h))

# %% exercise-05.3
pipeline = "dce,cse,autodiff,remat{recompute=all},claim,fuse,del"
