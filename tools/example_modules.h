// Built-in example programs for the tools: the seed variants (examples/seed_variants.h) traced
// for bf16 x[2048,2048] sharded P('x','y') and w[2048,1024] sharded P('x',None) on an x-by-y mesh.
#ifndef SHARDJIT_TOOLS_EXAMPLE_MODULES_H_
#define SHARDJIT_TOOLS_EXAMPLE_MODULES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/ir.pb.h"

namespace shardjit::tools {

// "seed_a" ... "seed_e".
std::vector<std::string> ExampleNames();

// The traced (global-view, not yet lowered) module of example `name` on a `size_x` x `size_y`
// mesh; needs no data.
absl::StatusOr<ir::Module> TracedExample(std::string_view name, int64_t size_x = 2,
                                         int64_t size_y = 2);

}  // namespace shardjit::tools

#endif  // SHARDJIT_TOOLS_EXAMPLE_MODULES_H_
