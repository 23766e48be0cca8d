// The pallas_call compiler (backends/x86/pallas_compiler.h): axis queries, semaphores and DMAs
// through the kernel's peers.
#include "backends/x86/pallas_compiler.h"

#include "backends/reference/pallas.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "ir/collective_groups.h"
#include "ir/pallas.h"
#include "ir/prim.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {

using ir::Prim;

std::string Compiler::SemaphoreReader::Name(int64_t flat) const {
  std::vector<int64_t> at(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    at[d] = flat % dims[d];
    flat /= dims[d];
  }
  return fmt::format("{}[{}]", name, fmt::join(at, ","));
}

// axis_index / axis_size: where the device running the kernel sits in the run's mesh.
absl::Status Compiler::AxisQuery(const ir::Op& op, Program& out) {
  Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
  const int slot = values_.at(op.results(0)).slot;
  const ir::AxisList axes = ir::CollectiveAxes(op);
  const bool index = ir::PrimOf(op) == Prim::kAxisIndex;
  const std::string opcode = op.opcode();
  out.push_back([=](Frame& f) -> absl::Status {
    if (f.peers == nullptr || f.peers->mesh().axes_size() == 0) {
      return absl::InvalidArgumentError(
          fmt::format("{}: needs a mapped axis (call the kernel inside shard_map)", opcode));
    }
    if (index) {
      f.scalars[slot] = ir::CombinedAxisIndex(f.peers->mesh(), f.peers->position(), axes);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(f.scalars[slot], ir::CombinedAxisSize(f.peers->mesh(), axes));
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

Compiler::SemaphoreReader Compiler::SemaphoreAt(const ir::Op& op, int k) const {
  const int param = ref_of_.at(op.operands(k));
  const ir::ShapedType type = ref_types_.at(param);
  std::vector<std::function<int64_t(const Frame&)>> indices;
  for (size_t d = 0; d < type.dims.size(); ++d) {
    indices.push_back(ScalarReader(op.operands(k + 1 + static_cast<int>(d))));
  }
  const ir::Op* call = &op_;
  const std::string opcode = op.opcode();
  SemaphoreReader r;
  r.name = reference::KernelRefName(a_, param);
  r.dims = type.dims;
  r.next = k + 1 + static_cast<int>(type.dims.size());
  r.slot = [=](const Frame& f) -> absl::StatusOr<SemaphoreSlot> {
    int64_t flat = 0;
    std::vector<int64_t> at;
    bool inside = true;
    for (size_t d = 0; d < indices.size(); ++d) {
      at.push_back(indices[d](f));
      inside = inside && at.back() >= 0 && at.back() < type.dims[d];
      flat = flat * type.dims[d] + at.back();
    }
    if (!inside) {
      return absl::OutOfRangeError(fmt::format(
          "{}: {}: semaphore index ({}) is outside {}", opcode,
          reference::KernelWhere(*call, f.index), fmt::join(at, ","), type.Array().ToString()));
    }
    return SemaphoreSlot{param, flat};
  };
  return r;
}

// The device the operands from `k` on name (this one when there are none).
std::function<absl::StatusOr<int64_t>(const Frame&)> Compiler::TargetAt(
    const ir::Op& op, int k, const google::protobuf::RepeatedPtrField<std::string>& axes,
    bool logical) const {
  std::vector<std::function<int64_t(const Frame&)>> values;
  for (int i = k; i < op.operands_size(); ++i) values.push_back(ScalarReader(op.operands(i)));
  const std::vector<std::string> names(axes.begin(), axes.end());
  const ir::Op* call = &op_;
  const std::string opcode = op.opcode();
  return [=](const Frame& f) -> absl::StatusOr<int64_t> {
    std::vector<int64_t> v;
    for (const auto& read : values) v.push_back(read(f));
    return TargetPosition(f.peers->mesh(), f.peers->position(), names, logical, v,
                          fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index)));
  };
}

// semaphore_signal / semaphore_wait / semaphore_read / dma_wait through the kernel's peers.
absl::Status Compiler::SemaphoreStep(const ir::Op& op, Program& out) {
  const Prim prim = ir::PrimOf(op);
  SemaphoreReader sem = SemaphoreAt(op, 0);
  std::function<int64_t(const Frame&)> amount = [](const Frame&) { return int64_t{0}; };
  if (prim == Prim::kDmaWait) {
    amount = [bytes = op.dma_wait().bytes()](const Frame&) { return bytes; };
  } else if (prim != Prim::kSemaphoreRead) {
    amount = ScalarReader(op.operands(sem.next));
  }
  std::function<absl::StatusOr<int64_t>(const Frame&)> target;
  if (prim == Prim::kSemaphoreSignal) {
    target = TargetAt(op, sem.next + 1, op.semaphore_signal().device_axes(),
                      op.semaphore_signal().logical_device());
  }
  int slot = -1;
  if (prim == Prim::kSemaphoreRead) {
    Define(op.results(0), Kind::kScalar, ir::FromProto(op.result_types(0)));
    slot = values_.at(op.results(0)).slot;
  }
  const ir::Op* call = &op_;
  const std::string opcode = op.opcode();
  out.push_back([=](Frame& f) -> absl::Status {
    RETURN_IF_ERROR(f.deferred.SettleAll());  // peers may read or write any ref from here on
    ASSIGN_OR_RETURN(SemaphoreSlot s, sem.slot(f));
    const std::string where =
        fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index));
    switch (prim) {
      case Prim::kSemaphoreSignal: {
        ASSIGN_OR_RETURN(int64_t to, target(f));
        return f.peers->Signal(to, s, amount(f), where);
      }
      case Prim::kSemaphoreRead:
        f.scalars[slot] = f.peers->Read(s);
        return absl::OkStatus();
      default: {
        return f.peers->Wait(s, amount(f), where, sem.Name(s.index));
      }
    }
  });
  return absl::OkStatus();
}

// dma_start: the src window copied into the dst window here or on the target device, counted
// on the semaphores.
absl::Status Compiler::DmaStart(const ir::Op& op, Program& out) {
  const ir::DmaAttrs& a = op.dma();
  const int src_rank = static_cast<int>(RefRank(op.operands(0)));
  const int dst = 1 + src_rank;
  const int dst_rank = static_cast<int>(RefRank(op.operands(dst)));
  auto from = WindowOf(op, 0, 1, src_rank, a.src_sizes(), a.src_squeezed());
  auto to = WindowOf(op, dst, dst + 1, dst_rank, a.dst_sizes(), a.dst_squeezed());
  SemaphoreReader dst_sem = SemaphoreAt(op, dst + 1 + dst_rank);
  int next = dst_sem.next;
  std::optional<SemaphoreReader> src_sem;
  if (a.has_src_sem()) {
    src_sem = SemaphoreAt(op, next);
    next = src_sem->next;
  }
  auto target = TargetAt(op, next, a.device_axes(), a.logical_device());
  const int dst_param = ref_of_.at(op.operands(dst));
  const ir::ShapedType dst_type = ref_types_.at(dst_param).Array();
  const ir::Op* call = &op_;
  const std::string opcode = op.opcode();
  out.push_back([=](Frame& f) -> absl::Status {
    RETURN_IF_ERROR(f.deferred.SettleAll());
    ASSIGN_OR_RETURN(View src, from(f));
    ASSIGN_OR_RETURN(View window, to(f));
    ASSIGN_OR_RETURN(SemaphoreSlot recv, dst_sem.slot(f));
    ASSIGN_OR_RETURN(int64_t device, target(f));
    const int64_t elem = ir::DTypeSize(src.dtype);
    const View& base = f.refs[dst_param];
    WindowCopy copy;
    copy.src = src.data;
    copy.from.strides.assign(src.strides.begin(), src.strides.end());
    copy.dims.assign(src.dims.begin(), src.dims.end());
    copy.elem = elem;
    copy.dst_type = dst_type;
    copy.to.offset = (window.data - base.data) / elem;
    copy.to.strides.assign(window.strides.begin(), window.strides.end());
    std::optional<SemaphoreSlot> send;
    if (src_sem) {
      ASSIGN_OR_RETURN(send, src_sem->slot(f));
    }
    return StartDma(*f.peers, device, copy, base.data, dst_param, recv,
                    send ? &*send : nullptr,
                    fmt::format("{}: {}", opcode, reference::KernelWhere(*call, f.index)));
  });
  return absl::OkStatus();
}

}  // namespace shardjit::backends::x86::pallas
