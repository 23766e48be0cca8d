#include "backends/x86/pallas_call.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "absl/status/status.h"
#include "backends/x86/pallas_padding.h"
#include "backends/x86/pallas_program.h"

namespace shardjit::backends::x86 {
namespace {

std::atomic<int64_t> compiled_runs{0};
std::atomic<int64_t> interpreted_runs{0};
std::atomic<int64_t> masked_selects{0};

}  // namespace

PallasCallStats GetPallasCallStats() {
  return {compiled_runs.load(), interpreted_runs.load(), masked_selects.load(),
          pallas::GemmRowsSkipped(), pallas::DeferredGemmsRun(), pallas::PaddedOutputBlocks()};
}

reference::Kernel MakePallasCallKernel(reference::KernelOverrides kernels) {
  struct Cache {
    reference::KernelOverrides kernels;
    std::mutex mu;
    // nullptr: the op does not compile (the evaluator interprets it).
    std::unordered_map<const ir::Op*, std::shared_ptr<const pallas::CompiledCall>> calls;
  };
  auto cache = std::make_shared<Cache>();
  cache->kernels = std::move(kernels);
  return [cache](const ir::Op& op, const std::vector<ir::Tensor>& operands,
                 ir::Allocator* allocator) -> absl::StatusOr<std::vector<ir::Tensor>> {
    std::shared_ptr<const pallas::CompiledCall> call;
    {
      std::lock_guard<std::mutex> lock(cache->mu);
      auto it = cache->calls.find(&op);
      if (it == cache->calls.end()) {
        absl::StatusOr<std::unique_ptr<pallas::CompiledCall>> compiled =
            pallas::CompileCall(op, cache->kernels);
        if (!compiled.ok() && !absl::IsUnimplemented(compiled.status())) {
          return compiled.status();
        }
        if (compiled.ok()) masked_selects += (*compiled)->masked_selects;
        it = cache->calls.emplace(&op, compiled.ok() ? std::move(*compiled) : nullptr).first;
      }
      call = it->second;
    }
    if (call == nullptr) {
      ++interpreted_runs;
      return absl::UnimplementedError("pallas_call: interpreted");
    }
    ++compiled_runs;
    return call->Run(operands, allocator);
  };
}

}  // namespace shardjit::backends::x86

