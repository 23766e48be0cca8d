// Base of every xbyak kernel generator: owns the System V prologue/epilogue (callee-saved
// registers), names the kernel, and reports it to profilers (perf map) when asked.
#ifndef SHARDJIT_BACKENDS_X86_JIT_GENERATOR_H_
#define SHARDJIT_BACKENDS_X86_JIT_GENERATOR_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "xbyak/xbyak.h"

namespace shardjit::backends::x86 {

class JitGenerator : public Xbyak::CodeGenerator {
 public:
  explicit JitGenerator(std::string name, size_t max_code_bytes = 64 << 10);
  ~JitGenerator() override = default;

  // Emits prologue, GenerateBody() and epilogue, then makes the code executable. Xbyak errors
  // become Internal statuses naming the kernel.
  absl::Status Create();

  const std::string& name() const { return name_; }
  const void* code() const { return getCode(); }
  size_t code_size() const { return getSize(); }

 protected:
  // The first integer argument (System V).
  const Xbyak::Reg64 abi_param1 = rdi;

  // Emits everything between prologue and epilogue. May use every register except rsp.
  virtual void GenerateBody() = 0;

 private:
  void Prologue();
  void Epilogue();

  std::string name_;
};

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_JIT_GENERATOR_H_
