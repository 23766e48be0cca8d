// Fuzzes the proto loaders and the verifier: the first byte picks binary or text proto, the rest
// is the file. Any bytes load or fail with a Status, never crash; a module that verifies prints,
// and serializes and loads back to the same module.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "ir/io.h"
#include "ir/printer.h"
#include "ir/verifier.h"

// Malformed strings make the protobuf library log each one; the Status says enough.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using shardjit::ir::ModuleFormat;
  if (size == 0) return 0;
  const ModuleFormat format = data[0] % 2 == 0 ? ModuleFormat::kBinary : ModuleFormat::kPbtxt;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<shardjit::ir::Module> module = shardjit::ir::ParseModuleAs(bytes, format);
  if (!module.ok() || !shardjit::ir::VerifyModule(*module).ok()) return 0;
  const std::string printed = shardjit::ir::PrintModule(*module);
  absl::StatusOr<std::string> saved = shardjit::ir::SerializeModuleAs(*module, format);
  if (!saved.ok()) return 0;
  absl::StatusOr<shardjit::ir::Module> again = shardjit::ir::ParseModuleAs(*saved, format);
  if (!again.ok() || shardjit::ir::PrintModule(*again) != printed) {
    std::fprintf(stderr, "save and load differ:\n%s\n", printed.c_str());
    std::abort();
  }
  return 0;
}
