// Parses the text form written by ir/printer.h. Value names map to fresh ids in order of
// definition, so parsing printed canonical IR gives back the same proto.
#ifndef SHARDJIT_IR_PARSER_H_
#define SHARDJIT_IR_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"

namespace shardjit::ir {

// A whole module: the `module` header line and its `func` definitions.
absl::StatusOr<Module> ParseModule(std::string_view text);
// A single `{ lambda ; ... }` region (value ids start at 0).
absl::StatusOr<Region> ParseRegion(std::string_view text);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_PARSER_H_
