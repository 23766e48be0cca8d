// Runtime::ShardMapCache: the compiled shard_map bodies of one global-view program
// (Runtime::RunGlobal), keyed by op.
#ifndef SHARDJIT_RUNTIME_SHARD_MAP_CACHE_H_
#define SHARDJIT_RUNTIME_SHARD_MAP_CACHE_H_

#include <memory>
#include <mutex>
#include <vector>

#include "backends/executable.h"
#include "ir/ir.pb.h"
#include "runtime/collective_plan.h"
#include "runtime/runtime.h"

namespace shardjit::runtime {

struct Runtime::ShardMapCache {
  struct Entry {
    const ir::Op* op;
    std::unique_ptr<backends::Executable> body;
    std::unique_ptr<CollectivePlan> plan;  // the body's collectives on the mesh
  };
  std::mutex mu;
  std::vector<Entry> entries;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_SHARD_MAP_CACHE_H_
