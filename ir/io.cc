#include "ir/io.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace shardjit::ir {
namespace {

// Keeps the first text-format parse error instead of logging it.
class CollectErrors final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = fmt::format("line {}:{}: {}", line + 1, column + 1, message);
  }
  std::string first;
};

}  // namespace

ModuleFormat FormatFromPath(const std::string& path) {
  if (absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".binpb")) return ModuleFormat::kBinary;
  if (absl::EndsWith(path, ".pbtxt")) return ModuleFormat::kPbtxt;
  return ModuleFormat::kText;
}

std::optional<ModuleFormat> ParseModuleFormat(std::string_view name) {
  if (name == "text") return ModuleFormat::kText;
  if (name == "pbtxt") return ModuleFormat::kPbtxt;
  if (name == "binary") return ModuleFormat::kBinary;
  return std::nullopt;
}

std::string_view FormatExtension(ModuleFormat format) {
  switch (format) {
    case ModuleFormat::kBinary:
      return ".pb";
    case ModuleFormat::kPbtxt:
      return ".pbtxt";
    case ModuleFormat::kText:
      break;
  }
  return ".txt";
}

absl::StatusOr<Module> ParseModuleAs(const std::string& data, ModuleFormat format) {
  Module m;
  switch (format) {
    case ModuleFormat::kBinary:
      if (!m.ParseFromString(data)) {
        return absl::InvalidArgumentError("not a binary ir.Module proto");
      }
      return m;
    case ModuleFormat::kPbtxt: {
      CollectErrors errors;
      google::protobuf::TextFormat::Parser parser;
      parser.RecordErrorsTo(&errors);
      if (!parser.ParseFromString(data, &m)) {
        return absl::InvalidArgumentError("not a text-format ir.Module proto: " + errors.first);
      }
      return m;
    }
    case ModuleFormat::kText:
      return ParseModule(data);
  }
  return absl::InternalError("unknown format");
}

absl::StatusOr<std::string> SerializeModuleAs(const Module& module, ModuleFormat format) {
  std::string out;
  switch (format) {
    case ModuleFormat::kBinary:
      if (!module.SerializeToString(&out)) return absl::InternalError("serialization failed");
      return out;
    case ModuleFormat::kPbtxt:
      if (!google::protobuf::TextFormat::PrintToString(module, &out)) {
        return absl::InternalError("text-format printing failed");
      }
      return out;
    case ModuleFormat::kText:
      return PrintModule(module, {.locations = true});
  }
  return absl::InternalError("unknown format");
}

absl::StatusOr<Module> ReadModuleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open module file \"{}\"", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<Module> m = ParseModuleAs(buffer.str(), FormatFromPath(path));
  if (!m.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", path, m.status().message()));
  }
  return m;
}

absl::Status WriteModuleFile(const Module& module, const std::string& path) {
  ASSIGN_OR_RETURN(std::string data, SerializeModuleAs(module, FormatFromPath(path)));
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(fmt::format("cannot write \"{}\"", path));
  out << data;
  return out ? absl::OkStatus() : absl::DataLossError(fmt::format("write to \"{}\" failed", path));
}

}  // namespace shardjit::ir
