# Reference answers for tutorials/04_executors_claiming_fusion.ipynb (see tests/tutorials/fill.py).

# %% exercise-04.1
def why_not_fused(trace):
    return {call.sym.qualname: call.declined[-1][1] for call in trace.bound_symbols
            if call.sym.module != "fusion" and call.sym.name != "python_del"}

# %% exercise-04.2
def g_fused(x):
    a = torch.sin(x) * 2 + 1
    b = a / (1 + torch.abs(a))
    return torch.relu(b) * a

# %% exercise-04.3
pipeline = "dce,cse,claim{executors=inductor+torch},fuse{max_size=2},del"
