#!/usr/bin/env bash
# Download the nvFuser wheel here (where PyPI is reachable), recompress it with LZMA (the same files and RECORD,
# each entry ZIP_LZMA instead of deflate: 80 MB becomes about 58 MB, which pip installs as it is) and cut it into
# parts that each fit one transfer to a GPU machine that cannot reach PyPI; benchmarks/gpu/run.sh there joins and
# installs them.
#
#   bash benchmarks/gpu/fetch_nvfuser.sh [PACKAGE] [PART_MIB]
#
# PACKAGE defaults to nvfuser-cu130-torch210 (CUDA 13, built for torch 2.10; CPython 3.12), PART_MIB to 60 (one
# part: the recompressed wheel and the repository together fit a 64 MiB transfer). Recompressing takes about 2 min.
# Writes benchmarks/gpu/wheel-parts/ (git-ignored): part-0, part-1, ... and MANIFEST (the wheel's
# file name, size, sha256 and part count), which run.sh checks before installing.
set -euo pipefail
cd "$(dirname "$0")"
PKG=${1:-nvfuser-cu130-torch210}
PART_MIB=${2:-60}
PY=${PYTHON:-python3}
DEST=wheel-parts
DL=$(mktemp -d)
trap 'rm -rf "$DL"' EXIT

"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$DL" "$PKG"
WHEEL=$(cd "$DL" && ls -- *.whl)
mkdir -p "$DL/lzma"
"$PY" -c '
import sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
    for info in zi.infolist():
        zo.writestr(info, zi.read(info), compress_type=zipfile.ZIP_LZMA)
' "$DL/$WHEEL" "$DL/lzma/$WHEEL"
mv "$DL/lzma/$WHEEL" "$DL/$WHEEL"
rm -rf "$DEST" && mkdir -p "$DEST"
split -b "${PART_MIB}M" -d -a 1 "$DL/$WHEEL" "$DEST/part-"
{
    echo "wheel=$WHEEL"
    echo "bytes=$(stat -c %s "$DL/$WHEEL")"
    echo "sha256=$(sha256sum "$DL/$WHEEL" | cut -d' ' -f1)"
    echo "parts=$(ls "$DEST" | grep -c "^part-")"
} > "$DEST/MANIFEST"
cat "$DEST/MANIFEST"
ls -l "$DEST"
echo "copy MANIFEST and every part to benchmarks/gpu/wheel-parts/ on the GPU machine (one part per transfer where transfers are small), then run benchmarks/gpu/run.sh there"
