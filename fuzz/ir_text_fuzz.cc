// Fuzzes the IR text parser and the verifier: any bytes parse or fail with a Status, never crash;
// a module that parses and verifies prints to text that parses back to the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<shardjit::ir::Module> module = shardjit::ir::ParseModule(text);
  if (!module.ok() || !shardjit::ir::VerifyModule(*module).ok()) return 0;
  const std::string printed = shardjit::ir::PrintModule(*module);
  absl::StatusOr<shardjit::ir::Module> again = shardjit::ir::ParseModule(printed);
  if (!again.ok() || shardjit::ir::PrintModule(*again) != printed) {
    std::fprintf(stderr, "round trip failed: %s\n%s\n",
                 again.ok() ? "prints differently" : std::string(again.status().message()).c_str(),
                 printed.c_str());
    std::abort();
  }
  return 0;
}
