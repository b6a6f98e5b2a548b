# Reference answers for tutorials/02_prims_and_decompositions.ipynb (see tests/tutorials/fill.py).

# %% exercise-02.1
def prims_of(call):
    if not call.subsymbols:
        return [call.sym.qualname]
    return [name for sub in call.subsymbols for name in prims_of(sub)]

# %% exercise-02.2
pipeline = "dce,claim{decompose=layer_norm},del"

# %% exercise-02.3
def softplus_prims(a):
    return prims.log1p(prims.exp(a))
