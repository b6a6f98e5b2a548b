#!/usr/bin/env bash
# Checks c10_shim.cpp against the installed torch (any torch whose MessageLogger takes a SourceLocation; no GPU
# needed): a library built as nvFuser's wheel was, against torch 2.10's MessageLogger (the old constructor, the
# old and smaller object), must fail to load without the shim, naming the missing symbol, and with the shim
# preloaded must load, log through torch's own MessageLogger, and leave the bytes after its object untouched.
#
#   bash benchmarks/gpu/shim_check.sh        (PYTHON=... for a python other than python3)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
CXX=${CXX:-g++}
TORCH=$("$PY" -c "import os, torch; print(os.path.dirname(torch.__file__))")
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

cat >"$W/old_user.cpp" <<'EOF'
// compiled against torch 2.10's declaration, as nvFuser's wheel was
#include <cstring>
#include <sstream>
namespace c10 {
class MessageLogger {
 public:
  MessageLogger(const char* file, int line, int severity, bool exit_on_fatal = true);
  ~MessageLogger() noexcept(false);
  std::stringstream& stream();
 private:
  std::stringstream stream_;
  int severity_;
  bool exit_on_fatal_;
};
}  // namespace c10
struct Framed {  // the logger with guard bytes right after it, where torch 2.11's larger object would end
  c10::MessageLogger logger;
  unsigned char after[32];
};
extern "C" int log_a_warning() {
  alignas(Framed) unsigned char raw[sizeof(Framed)];
  std::memset(raw, 0x5a, sizeof raw);
  auto* f = reinterpret_cast<Framed*>(raw);
  new (&f->logger) c10::MessageLogger("old_user.cpp", 42, 1 /* WARNING */, false);
  f->logger.stream() << "logged through the shim";
  f->logger.~MessageLogger();
  for (unsigned char b : f->after)
    if (b != 0x5a) return 2;  // something wrote past the old object
  return 0;
}
EOF
cat >"$W/main.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) { printf("dlopen failed: %s\n", dlerror()); return 1; }
  int (*f)(void) = (int (*)(void))dlsym(h, "log_a_warning");
  return f();
}
EOF
"$CXX" -std=c++17 -shared -fPIC "$W/old_user.cpp" -L"$TORCH/lib" -lc10 -Wl,-rpath,"$TORCH/lib" -o "$W/libold_user.so"
"$CXX" -std=c++17 -shared -fPIC -O2 -Wno-invalid-offsetof -I"$TORCH/include" "$HERE/c10_shim.cpp" \
    -L"$TORCH/lib" -lc10 -Wl,-rpath,"$TORCH/lib" -o "$W/libc10_shim.so"
"$CXX" -x c++ "$W/main.c" -ldl -o "$W/main"

fail=0
out=$("$W/main" "$W/libold_user.so" 2>&1) && rc=0 || rc=$?
if ((rc == 1)) && grep -q "undefined symbol: _ZN3c1013MessageLoggerC1EPKciib" <<<"$out"; then
    echo "ok   without the shim: $out"
else
    echo "FAIL without the shim: expected the undefined old constructor, got rc=$rc: $out"
    fail=1
fi
out=$(LD_PRELOAD="$W/libc10_shim.so" "$W/main" "$W/libold_user.so" 2>&1) && rc=0 || rc=$?
if ((rc == 0)) && grep -q "old_user.cpp:42\] logged through the shim" <<<"$out"; then
    echo "ok   with the shim: $out"
else
    echo "FAIL with the shim: rc=$rc (2: bytes after the object changed): $out"
    fail=1
fi
exit $fail
