// Reading and writing modules as binary protos, text protos (pbtxt) or IR text.
#ifndef SHARDJIT_IR_IO_H_
#define SHARDJIT_IR_IO_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

enum class ModuleFormat { kBinary, kPbtxt, kText };

// By extension: .pb/.binpb binary, .pbtxt text proto, anything else IR text.
ModuleFormat FormatFromPath(const std::string& path);
// "text", "pbtxt" or "binary" (the names tools take for --format); nullopt for other names.
std::optional<ModuleFormat> ParseModuleFormat(std::string_view name);
// ".txt", ".pbtxt" or ".pb": an extension FormatFromPath maps back to `format`.
std::string_view FormatExtension(ModuleFormat format);

absl::StatusOr<Module> ReadModuleFile(const std::string& path);
absl::Status WriteModuleFile(const Module& module, const std::string& path);

absl::StatusOr<Module> ParseModuleAs(const std::string& data, ModuleFormat format);
absl::StatusOr<std::string> SerializeModuleAs(const Module& module, ModuleFormat format);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_IO_H_
