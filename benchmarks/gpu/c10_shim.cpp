// The one c10 symbol an nvFuser wheel built for torch 2.10 needs and torch 2.11 no longer exports:
//   c10::MessageLogger::MessageLogger(const char* file, int line, int severity, bool exit_on_fatal)
// torch 2.11 has MessageLogger(c10::SourceLocation, int severity, bool exit_on_fatal) instead, and its
// object grew by the SourceLocation it keeps at the end. Code built for 2.10 reserves the old, smaller
// object, so forwarding to the new constructor would write past it. This constructor therefore fills only
// the fields both layouts share (stream_, severity_, exit_on_fatal_: same order, same offsets, checked
// below against the installed header), and torch 2.11's own stream() and destructor work on it as they are.
//
// Loaded with LD_PRELOAD by benchmarks/gpu/run.sh, only when importing nvFuser fails on this symbol.
// Build: g++ -std=c++17 -shared -fPIC -O2 -I$TORCH/include c10_shim.cpp -L$TORCH/lib -lc10 -Wl,-rpath,$TORCH/lib
#include <cstddef>
#include <new>
#include <sstream>

#define private public  // the layout check below reads the private fields' offsets; nothing else
#include <c10/util/logging_common.h>
#undef private

namespace {

struct OldLogger {  // torch 2.10's MessageLogger, non-Android
  std::stringstream stream_;
  int severity_;
  bool exit_on_fatal_;
};

static_assert(offsetof(c10::MessageLogger, stream_) == offsetof(OldLogger, stream_),
              "torch's MessageLogger no longer starts with its stream: this shim does not fit this torch");
static_assert(offsetof(c10::MessageLogger, severity_) == offsetof(OldLogger, severity_),
              "torch's MessageLogger moved severity_: this shim does not fit this torch");
static_assert(offsetof(c10::MessageLogger, exit_on_fatal_) == offsetof(OldLogger, exit_on_fatal_),
              "torch's MessageLogger moved exit_on_fatal_: this shim does not fit this torch");
static_assert(sizeof(OldLogger) <= sizeof(c10::MessageLogger), "unexpected: the old object is larger");

const char kSeverity[] = "FEWIV";  // the letter c10 prints for FATAL, ERROR, WARNING, INFO, VERBOSE

}  // namespace

// A member function's `this` is its first argument in the Itanium C++ ABI; the asm label gives this
// function the complete-object constructor's mangled name (nvFuser references C1, not C2).
extern "C" void thunderlab_old_message_logger(void* self, const char* file, int line, int severity,
                                              bool exit_on_fatal) __asm__("_ZN3c1013MessageLoggerC1EPKciib");

extern "C" void thunderlab_old_message_logger(void* self, const char* file, int line, int severity,
                                              bool exit_on_fatal) {
  auto* m = static_cast<OldLogger*>(self);
  new (&m->stream_) std::stringstream();
  m->severity_ = severity;
  // torch 2.11 throws a FATAL message that does not exit as a c10::Error built from the SourceLocation
  // this object has no room for; abort with the message instead (exit_on_fatal) rather than read past it
  m->exit_on_fatal_ = exit_on_fatal || severity >= 3;
  int level = 3 - severity;
  m->stream_ << "[" << kSeverity[level < 0 ? 0 : (level > 4 ? 4 : level)] << " " << (file ? file : "?") << ":"
             << line << "] ";
}
