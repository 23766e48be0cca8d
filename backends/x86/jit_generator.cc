#include "backends/x86/jit_generator.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"

namespace shardjit::backends::x86 {
namespace {

// Callee-saved general purpose registers of the System V ABI (rsp aside).
const Xbyak::Reg64 kCalleeSaved[] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                                     Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};

// Appends "<start> <size> <name>" to /tmp/perf-<pid>.map when SHARDJIT_JIT_PERF_MAP is set, so
// that `perf report` names generated kernels.
void RecordForProfilers(const void* code, size_t size, const std::string& name) {
  static const bool enabled = std::getenv("SHARDJIT_JIT_PERF_MAP") != nullptr;
  if (!enabled) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::string path = fmt::format("/tmp/perf-{}.map", getpid());
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%lx %zx %s\n", reinterpret_cast<unsigned long>(code), size, name.c_str());
    std::fclose(f);
  }
}

}  // namespace

JitGenerator::JitGenerator(std::string name, size_t max_code_bytes)
    : Xbyak::CodeGenerator(max_code_bytes, Xbyak::DontSetProtectRWE), name_(std::move(name)) {}

void JitGenerator::Prologue() {
  for (const Xbyak::Reg64& r : kCalleeSaved) push(r);
}

void JitGenerator::Epilogue() {
  for (int i = static_cast<int>(std::size(kCalleeSaved)) - 1; i >= 0; --i) pop(kCalleeSaved[i]);
  vzeroupper();
  ret();
}

absl::Status JitGenerator::Create() {
  try {
    Prologue();
    GenerateBody();
    Epilogue();
    ready();
    setProtectModeRE();
  } catch (const Xbyak::Error& e) {
    return absl::InternalError(absl::StrCat(name_, ": code generation failed: ", e.what()));
  }
  RecordForProfilers(getCode(), getSize(), name_);
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86
