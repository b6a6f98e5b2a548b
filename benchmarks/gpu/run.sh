#!/usr/bin/env bash
# Every GPU check of thunderlab in one run, for a machine with a CUDA GPU and no network:
#
#   OUT=/some/empty/folder bash benchmarks/gpu/run.sh        (from the repository root)
#
# Steps, each time-boxed (`timeout`), each recorded with its exit status, a failing one never stopping the rest:
#   nvfuser   make nvFuser importable if it is not: install the wheel from benchmarks/gpu/wheel-parts/ (cut by
#             fetch_nvfuser.sh where PyPI is reachable) and, when the import fails on the c10::MessageLogger
#             constructor torch 2.11 no longer has, build benchmarks/gpu/c10_shim.cpp, check it (shim_check.sh)
#             and load it with LD_PRELOAD for every later step; otherwise record what was tried and what it printed
#   env       GPU, driver, torch, CUDA, Triton, nvFuser (bench.py env)
#   tests     pytest -m "cuda or nvfuser" over the test files that use those markers (counts, skip reasons, failures)
#   fusion    eager / torch.compile / thunderlab+inductor / thunderlab+nvFuser on CUDA (bench.py fusion)
#   zoo       benchmarks/zoo.py --device cuda: eager / thunderlab's default / torch.compile, inference and training
#   profile   one nanoGPT block program: CUDA-event region timings beside profiler kernel times, and its HTML
#             report (bench.py profile)
#   merge     one JSON: $OUT/benchmarks/results/gpu-<gpu>.json (benchmarks/results/ once copied back)
# Also written: $OUT/run.log (all output) and $OUT/gpu-nanogpt-report.html.
#
# Without CUDA the profile, fusion and zoo steps record why they were skipped (the JSON is then gpu-dryrun-cpu.json).
# GPU_RUN_CPU_CHECK=1 runs them on CPU at small sizes instead, to check the script (gpu-cpucheck-cpu.json).
# GPU_RUN_BUDGET_S (default 480) bounds the whole run; each step gets at most what is left of it.
# GPU_RUN_ZOO_MODELS (default llama,bert,resnet,gpt2): the zoo step's models, timed in that order.
# GPU_RUN_STEPS (default: all): the steps after nvfuser and env to run, e.g. "tests" then "fusion,zoo" in a second
# run, so that a machine lost mid-run loses one part; the JSON's name then ends in the steps (gpu-<gpu>-tests.json).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT/benchmarks/results"
PY=${PYTHON:-python3}
BUDGET=${GPU_RUN_BUDGET_S:-480}
RESERVE=20  # kept back for the merge
CPU_CHECK=${GPU_RUN_CPU_CHECK:-0}
ZOO_MODELS=${GPU_RUN_ZOO_MODELS:-llama,bert,resnet,gpt2}
STEPS=${GPU_RUN_STEPS:-}
START=$(date +%s)
WORK=$(mktemp -d)
PARTS=$WORK/parts
BUILD=$ROOT/benchmarks/gpu/.build
WHEELS=$ROOT/benchmarks/gpu/wheel-parts
mkdir -p "$PARTS" "$BUILD"
exec > >(tee -a "$OUT/run.log") 2>&1
TEE=$!
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor
PRELOAD=""
PYCMD=("$PY")  # how every step runs python; the nvfuser step adds the shim when it is needed
echo "thunderlab GPU checks: $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git'), budget ${BUDGET}s"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

step() {  # step NAME CAP_SECONDS COMMAND...: run COMMAND under timeout, append NAME rc seconds to steps.tsv
    local name=$1 cap=$2
    shift 2
    if [ -n "$STEPS" ] && [ "$name" != env ] && [[ ",$STEPS," != *",$name,"* ]]; then
        printf '%s\t125\t0\tnot run: not in GPU_RUN_STEPS=%s\n' "$name" "$STEPS" >>"$PARTS/steps.tsv"
        return
    fi
    local left=$((BUDGET - RESERVE - ($(date +%s) - START)))
    local t=$((cap < left ? cap : left))
    if ((t < 10)); then
        printf '%s\t125\t0\tnot run: %ss of the budget were left\n' "$name" "$left" >>"$PARTS/steps.tsv"
        echo "== $name: not run, ${left}s of the budget left"
        return
    fi
    echo "== $name (at most ${t}s)"
    local t0 rc note=""
    t0=$(now_ms)
    timeout -k 10 "$t" "$@"
    rc=$?
    ((rc == 124 || rc == 137)) && note="timed out after ${t}s"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(now_ms) - t0))" "$note" >>"$PARTS/steps.tsv"
    echo "== $name: rc=$rc $note"
}

probe_nvfuser() {  # prints nvFuser's version, or the import error; rc 0 when it imports
    timeout 90 "${PYCMD[@]}" -c "import torch, nvfuser_direct as m; print(getattr(m, '__version__', 'imported'))" \
        2>&1 | tail -n 3
    return "${PIPESTATUS[0]}"
}

nvfuser_setup() {  # writes $PARTS/nvfuser_setup.json: status, and every command tried with what it printed
    local log=$PARTS/nvfuser_setup.log status msg
    : >"$log"
    note() { printf '%s\n' "$*" >>"$log"; echo "  $*"; }
    msg=$(probe_nvfuser)
    local rc=$?
    note "\$ import nvfuser_direct -> rc=$rc: $msg"
    if ((rc != 0)) && grep -q "No module named 'nvfuser_direct'" <<<"$msg"; then
        if [ ! -f "$WHEELS/MANIFEST" ]; then
            status="absent: nvFuser is not installed and no wheel parts are in benchmarks/gpu/wheel-parts/ (run benchmarks/gpu/fetch_nvfuser.sh where PyPI is reachable, then copy every part here)"
        else
            local wheel bytes sha parts have
            wheel=$(sed -n 's/^wheel=//p' "$WHEELS/MANIFEST")
            bytes=$(sed -n 's/^bytes=//p' "$WHEELS/MANIFEST")
            sha=$(sed -n 's/^sha256=//p' "$WHEELS/MANIFEST")
            parts=$(sed -n 's/^parts=//p' "$WHEELS/MANIFEST")
            have=$(find "$WHEELS" -maxdepth 1 -name 'part-*' | wc -l)
            note "MANIFEST: $wheel, $bytes bytes, $parts parts; here: $(cd "$WHEELS" && ls part-* 2>/dev/null | tr '\n' ' ')"
            if ((have < parts)); then
                status="absent: $have of $parts wheel parts are here (copy the missing ones here)"
            else
                mkdir -p "$WORK/wheel"
                cat $(for ((i = 0; i < parts; i++)); do echo "$WHEELS/part-$i"; done) >"$WORK/wheel/$wheel"
                local got
                got=$(sha256sum "$WORK/wheel/$wheel" | cut -d' ' -f1)
                if [ "$got" != "$sha" ]; then
                    status="absent: the joined wheel's sha256 $got is not the MANIFEST's $sha"
                else
                    note "joined $wheel: sha256 matches"
                    note "python: $("$PY" -c 'import sys; print(sys.version.split()[0])'), the wheel's tag: $(cut -d- -f3 <<<"$wheel")"
                    msg=$(timeout 120 "$PY" -m pip install --no-deps --no-index --no-cache-dir "$WORK/wheel/$wheel" 2>&1 | tail -n 5)
                    local pip_rc=$?  # pipefail: pip's status, not tail's
                    note "\$ pip install --no-deps --no-index $wheel -> rc=$pip_rc: $msg"
                    if ((pip_rc != 0)); then
                        status="absent: pip could not install the wheel: $(tail -n 1 <<<"$msg")"
                    else
                        msg=$(probe_nvfuser)
                        rc=$?
                        note "\$ import nvfuser_direct -> rc=$rc: $msg"
                    fi
                fi
            fi
        fi
    fi
    if ((rc != 0)) && grep -q "undefined symbol: _ZN3c1013MessageLoggerC1EPKciib" <<<"$msg"; then
        local torch_dir cxx
        rm -f "$BUILD/libc10_shim.so"  # built afresh against this torch
        torch_dir=$("$PY" -c "import os, torch; print(os.path.dirname(torch.__file__))")
        cxx=${CXX:-$(command -v g++ || command -v c++ || echo g++)}
        note "the wheel needs c10::MessageLogger::MessageLogger(const char*, int, int, bool); building the shim with $cxx"
        msg=$(timeout 120 "$cxx" -std=c++17 -shared -fPIC -O2 -Wno-invalid-offsetof -I"$torch_dir/include" \
            benchmarks/gpu/c10_shim.cpp -L"$torch_dir/lib" -lc10 -Wl,-rpath,"$torch_dir/lib" \
            -o "$BUILD/libc10_shim.so" 2>&1 | tail -n 20)
        note "\$ $cxx -shared ... c10_shim.cpp -o $BUILD/libc10_shim.so -> rc=$? $msg"
        # the shim must not write past the old object: shim_check.sh checks that against this torch first
        local check
        check=$(PYTHON=$PY CXX=$cxx timeout 120 bash benchmarks/gpu/shim_check.sh 2>&1 | tail -n 5)
        local check_rc=$?
        note "\$ bash benchmarks/gpu/shim_check.sh -> rc=$check_rc: $check"
        if ((check_rc != 0)); then
            status="not importable: the wheel needs c10::MessageLogger::MessageLogger(const char*, int, int, bool) and the shim's check failed on this torch, so it was not loaded"
        elif [ -f "$BUILD/libc10_shim.so" ]; then
            PRELOAD=$BUILD/libc10_shim.so
            PYCMD=(env LD_PRELOAD="$PRELOAD" "$PY")
            msg=$(probe_nvfuser)
            rc=$?
            note "\$ LD_PRELOAD=$PRELOAD import nvfuser_direct -> rc=$rc: $msg"
            if ((rc != 0)); then
                PRELOAD=""
                PYCMD=("$PY")
            fi
        fi
    fi
    if [ -z "${status:-}" ]; then
        if ((rc == 0)); then
            status="importable: nvfuser_direct $(tail -n 1 <<<"$msg")${PRELOAD:+ (with the c10 shim preloaded)}"
        else
            local sym
            sym=$(grep -o 'undefined symbol: [A-Za-z0-9_]*' <<<"$msg" | head -n 1 | cut -d' ' -f3)
            status="not importable: $(tail -n 1 <<<"$msg")${sym:+ [$(c++filt "$sym" 2>/dev/null || echo "$sym")]}"
        fi
    fi
    note "status: $status"
    STATUS=$status PRELOAD_USED=$PRELOAD LOGFILE=$log "$PY" -c '
import json, os
print(json.dumps({"status": os.environ["STATUS"], "ld_preload": os.environ["PRELOAD_USED"],
                  "log": open(os.environ["LOGFILE"]).read().splitlines()}, indent=2))' >"$PARTS/nvfuser_setup.json"
}

# nvfuser runs in this shell (not a child) so that PRELOAD reaches the later steps; it bounds its own commands
T0=$(now_ms)
echo "== nvfuser"
nvfuser_setup
# rc 0: nvFuser imports (the JSON's nvfuser_setup says how); 1: it does not (and why)
printf 'nvfuser\t%s\t%s\t\n' "$(grep -q '"status": "importable' "$PARTS/nvfuser_setup.json"; echo $?)" \
    "$(($(now_ms) - T0))" >>"$PARTS/steps.tsv"

CPU_ARGS=()
SIZES=()
if [ "$CPU_CHECK" = 1 ]; then
    CPU_ARGS=(--cpu)
    SIZES=(--chain 256 --batch 2 --seq 32 --embd 64 --heads 4)
fi
step env 60 "${PYCMD[@]}" benchmarks/gpu/bench.py env --out "$PARTS/env.json"
# only the files that use the markers are collected: the rest of the suite needs packages a GPU image may lack
mapfile -t TEST_FILES < <(grep -rlE "pytest\.mark\.(cuda|nvfuser)" tests --include='*.py' | sort)
echo "test files with the markers: ${TEST_FILES[*]}"
step tests 90 "${PYCMD[@]}" -m pytest -m "cuda or nvfuser" "${TEST_FILES[@]}" -p no:cacheprovider -q -rs \
    --junitxml="$PARTS/tests.xml"
# a test process killed by a signal (a crash inside nvFuser, say) would take the whole benchmark with it
TESTS_RC=$(awk -F'\t' '$1 == "tests" {print $2}' "$PARTS/steps.tsv")
NO_NVFUSER=()
if ((${TESTS_RC:-0} > 128 && ${TESTS_RC:-0} != 137)); then
    NO_NVFUSER=(--no-nvfuser "the nvFuser tests' process died with exit status $TESTS_RC (a signal)")
fi
step fusion 180 "${PYCMD[@]}" benchmarks/gpu/bench.py fusion --out "$PARTS/fusion.json" ${NO_NVFUSER[@]+"${NO_NVFUSER[@]}"} \
    ${CPU_ARGS[@]+"${CPU_ARGS[@]}"} ${SIZES[@]+"${SIZES[@]}"} $([ "$CPU_CHECK" = 1 ] && echo --iters 3 --inner 1 --warmup 1)
# the model zoo on the GPU: eager, thunderlab's default (nvFuser, Inductor and torch raced per region), torch.compile
ZOO_ARGS=(--device cuda --models "$ZOO_MODELS" --rounds 20)
[ "$CPU_CHECK" = 1 ] && ZOO_ARGS=(--device cpu --models bert --modes inference --rounds 3)
if [ "$CPU_CHECK" = 1 ] || "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    step zoo 130 "${PYCMD[@]}" benchmarks/zoo.py "${ZOO_ARGS[@]}" --out "$PARTS/zoo.json"
else
    echo '{"skipped": "no CUDA device: torch.cuda.is_available() is False"}' >"$PARTS/zoo.json"
fi
step profile 60 "${PYCMD[@]}" benchmarks/gpu/bench.py profile --out "$PARTS/profile.json" --html "$OUT/gpu-nanogpt-report.html" \
    ${CPU_ARGS[@]+"${CPU_ARGS[@]}"} ${SIZES[@]+"${SIZES[@]}"} $([ "$CPU_CHECK" = 1 ] && echo --calls 5)

KIND=$("$PY" -c '
import json, re, sys
try:
    e = json.load(open(sys.argv[1]))
except Exception:
    e = {}
gpu = (e.get("gpu") or {}).get("name")
print(re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") if gpu else sys.argv[2])' "$PARTS/env.json" \
    "$([ "$CPU_CHECK" = 1 ] && echo cpucheck-cpu || echo dryrun-cpu)")
NOTE="benchmarks/gpu/run.sh on $KIND"
case $KIND in
    *-cpu) NOTE="$NOTE: no CUDA device, so this is a check of the script, not a GPU result" ;;
esac
RESULT=$OUT/benchmarks/results/gpu-$KIND${STEPS:+-${STEPS//,/-}}.json
"$PY" benchmarks/gpu/bench.py merge --parts "$PARTS" --out "$RESULT" --kind "$KIND" --note "$NOTE" \
    --total "$(($(date +%s) - START))"
echo "results: $RESULT; log: $OUT/run.log; report: $OUT/gpu-nanogpt-report.html; $(($(date +%s) - START)) s in all"
rm -rf "$WORK"
exec >&- 2>&-
wait "$TEE"  # run.log is complete when this script returns
