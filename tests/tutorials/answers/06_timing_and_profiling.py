# Reference answers for tutorials/06_timing_and_profiling.ipynb (see tests/tutorials/fill.py).

# %% exercise-06.1
def paired_ratio(fa, fb, rounds=7, calls=20):
    ratios = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fa()
        ta = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(calls):
            fb()
        tb = time.perf_counter() - start
        ratios.append(tb / ta)
    return statistics.median(ratios)

# %% exercise-06.2
def top_kernels(prof, n):
    totals = {}
    for rows in prof.values():
        for row in rows:
            totals[row["name"]] = totals.get(row["name"], 0.0) + row["self_cpu_us"]
    return sorted(totals, key=lambda k: -totals[k])[:n]
