// The jaxpr-like text form of the IR. Printing then parsing (ir/parser.h) round-trips exactly.
//
//   module seed [view=per_device mesh={x:2,y:2} devices=(0,1,2,3) entry=main
//                param_shardings=(P(x,y),P(x,None)) result_shardings=(P(x,None))]
//   func main = { lambda ; a:bf16[1024,1024] b:bf16[1024,1024]. let
//       c:bf16[2048,1024] = all_gather[axes=(x) axis=0 tiled=True] b
//       ...
//     in (f) }
//
// docs/ir_text.md has the grammar.
#ifndef SHARDJIT_IR_PRINTER_H_
#define SHARDJIT_IR_PRINTER_H_

#include <cstdint>
#include <string>

#include "ir/ir.pb.h"

namespace shardjit::ir {

struct PrintOptions {
  // Print each op's source location as `@loc("file", line)`.
  bool locations = false;
};

std::string PrintModule(const Module& module, const PrintOptions& options = {});
std::string PrintFunction(const Function& function, const PrintOptions& options = {});
// Just the `{ lambda ; ... }` form of a region at the given indentation.
std::string PrintRegion(const Region& region, int indent = 0, const PrintOptions& options = {});
// One op line without indentation or newline.
std::string PrintOp(const Op& op, int indent = 0, const PrintOptions& options = {});

// The text name of value `id`: a, b, ..., z, ba, bb, ... (reserved words get a trailing '_').
std::string ValueName(int64_t id);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_PRINTER_H_
