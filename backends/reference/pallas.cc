#include "backends/reference/pallas.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "backends/reference/kernel.h"
#include "backends/reference/strided_copy.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/pallas.h"
#include "ir/prim.h"
#include "ir/printer.h"
#include "ir/types.h"

namespace shardjit::backends::reference {
namespace {

ir::Tensor Index(int64_t v, ir::Allocator* allocator) {
  return ir::Tensor::FromDoubles({ir::DType::kS32, {}}, {static_cast<double>(v)}, allocator);
}

// Where one blocked operand or result sits in its array at the current step.
struct BlockWindow {
  std::vector<int64_t> start;   // per array dimension
  std::vector<int64_t> extent;  // the block's extent per array dimension (1 when squeezed)
  std::vector<int64_t> valid;   // how much of it lies inside the array
};

// Copies the part of the block inside the array between `array` and `block` (to the block when
// `into_block`).
void CopyBlock(ir::Tensor& array, ir::Tensor& block, const BlockWindow& w, bool into_block) {
  const int64_t elem = ir::DTypeSize(array.dtype());
  const std::vector<int64_t> array_strides = ir::RowMajorStrides(array.dims());
  const std::vector<int64_t> block_strides = ir::RowMajorStrides(w.extent);
  int64_t array_offset = 0;
  for (size_t d = 0; d < w.start.size(); ++d) array_offset += w.start[d] * array_strides[d];
  char* a = static_cast<char*>(array.data()) + array_offset * elem;
  char* b = static_cast<char*>(block.data());
  if (into_block) {
    CopyStrided(b, block_strides, a, array_strides, w.valid, elem);
  } else {
    CopyStrided(a, array_strides, b, block_strides, w.valid, elem);
  }
}

class GridRun {
 public:
  GridRun(const ir::Op& op, const std::vector<ir::Tensor>& operands,
          const KernelRegionRunner& run, ir::Allocator* allocator, KernelPeers* peers)
      : peers_(peers),
        op_(op),
        a_(op.pallas_call()),
        operands_(operands),
        run_(run),
        allocator_(allocator),
        base_(ir::NumDynamicGridAxes(a_)) {
    frame_.call = &op;
  }

  absl::StatusOr<std::vector<ir::Tensor>> Run() {
    const int64_t nsp = a_.num_scalar_prefetch();
    const ir::Region& kernel = a_.kernel();
    // Private copies: a kernel may store into any ref, and the operands belong to the caller.
    frame_.grid = GridSizes(a_, operands_);
    for (int64_t i = 0; i < nsp; ++i) prefetch_.push_back(operands_[base_ + i].Copy(allocator_));
    for (int i = 0; i < a_.out_shapes_size(); ++i) {
      const int64_t alias =
          i < a_.input_output_aliases_size() ? a_.input_output_aliases(i) : int64_t{-1};
      outputs_.push_back(alias >= 0 ? operands_[base_ + alias].Copy(allocator_)
                                    : PaddingArray(ir::FromProto(a_.out_shapes(i)), allocator_));
    }
    const int fixed = static_cast<int>(nsp) + a_.in_specs_size() + a_.out_specs_size();
    bool has_semaphores = false;
    for (int p = 0; p < kernel.params_size(); ++p) {
      frame_.ref_names[kernel.params(p).id()] = KernelRefName(a_, p);
      frame_.param_of[kernel.params(p).id()] = p;
      const ir::ShapedType type = ir::FromProto(kernel.params(p).type());
      has_semaphores |= type.semaphore != ir::Semaphore::kNone;
      if (p >= fixed) scratch_.push_back(PaddingArray(type, allocator_));
    }
    for (int i = 0; i < a_.in_specs_size(); ++i) {
      if (a_.in_specs(i).whole()) whole_inputs_[i] = operands_[base_ + nsp + i].Copy(allocator_);
    }
    // A kernel with semaphores is an instance that peers signal and copy into.
    std::optional<LocalKernelPeers> alone;
    if (has_semaphores) {
      if (peers_ == nullptr) peers_ = &alone.emplace();
      RETURN_IF_ERROR(peers_->Enter(op_, Buffers()));
      frame_.peers = peers_;
    }
    absl::Status status = Steps();
    if (frame_.peers != nullptr) frame_.peers->Exit(status);
    RETURN_IF_ERROR(status);
    return std::move(outputs_);
  }

 private:
  // The memory peers may copy into (ir::DmaDestinations): each kernel param that lives for the
  // whole call, inputs only where the kernel's dma_starts copy into them.
  std::vector<KernelBuffer> Buffers() {
    const int64_t nsp = a_.num_scalar_prefetch();
    const ir::Region& kernel = a_.kernel();
    const std::vector<bool> written = ir::DmaDestinations(a_);
    std::vector<KernelBuffer> buffers;
    for (int p = 0; p < kernel.params_size(); ++p) {
      KernelBuffer b{nullptr, ir::FromProto(kernel.params(p).type())};
      if (p < nsp + a_.in_specs_size() && !written[p]) {  // inputs no copy goes to: not offered
        buffers.push_back(std::move(b));
        continue;
      }
      const int input = p - static_cast<int>(nsp);
      const int output = input - a_.in_specs_size();
      const int scratch = output - a_.out_specs_size();
      ir::Tensor* t = p < nsp                                       ? &prefetch_[p]
                      : input < a_.in_specs_size()                 ? (a_.in_specs(input).whole()
                                                                          ? &whole_inputs_[input]
                                                                          : nullptr)
                      : output < a_.out_specs_size()               ? (a_.out_specs(output).whole()
                                                                          ? &outputs_[output]
                                                                          : nullptr)
                      : b.type.semaphore == ir::Semaphore::kNone ? &scratch_[scratch]
                                                                   : nullptr;
      if (t != nullptr) b.data = t->data();
      buffers.push_back(std::move(b));
    }
    return buffers;
  }

  absl::Status Steps() {
    int64_t steps = 1;
    for (int64_t g : frame_.grid) steps *= g;
    frame_.index.assign(a_.grid_size(), 0);
    for (int64_t step = 0; step < steps; ++step) {
      int64_t rest = step;
      for (int d = a_.grid_size() - 1; d >= 0; --d) {
        frame_.index[d] = rest % frame_.grid[d];
        rest /= frame_.grid[d];
      }
      RETURN_IF_ERROR(Step());
    }
    return absl::OkStatus();
  }

  absl::Status Step() {
    const int64_t nsp = a_.num_scalar_prefetch();
    std::vector<ir::Tensor> args(prefetch_.begin(), prefetch_.end());
    std::vector<BlockWindow> out_windows(a_.out_specs_size());
    for (int i = 0; i < a_.in_specs_size(); ++i) {
      const ir::BlockSpec& spec = a_.in_specs(i);
      if (spec.whole()) {
        args.push_back(whole_inputs_.at(i));
        continue;
      }
      ir::Tensor source = operands_[base_ + nsp + i];
      ASSIGN_OR_RETURN(BlockWindow w,
                       Window(spec, source.type(), fmt::format("in_specs[{}]", i)));
      ir::Tensor block = PaddingArray(ir::BlockRefType(spec, source.type()), allocator_);
      CopyBlock(source, block, w, /*into_block=*/true);
      args.push_back(std::move(block));
    }
    for (int i = 0; i < a_.out_specs_size(); ++i) {
      const ir::BlockSpec& spec = a_.out_specs(i);
      if (spec.whole()) {
        args.push_back(outputs_[i]);
        continue;
      }
      ASSIGN_OR_RETURN(out_windows[i],
                       Window(spec, outputs_[i].type(), fmt::format("out_specs[{}]", i)));
      ir::Tensor block = PaddingArray(ir::BlockRefType(spec, outputs_[i].type()), allocator_);
      CopyBlock(outputs_[i], block, out_windows[i], /*into_block=*/true);
      args.push_back(std::move(block));
    }
    std::vector<ir::Tensor> blocks(args.begin() + nsp + a_.in_specs_size(), args.end());
    args.insert(args.end(), scratch_.begin(), scratch_.end());
    RETURN_IF_ERROR(run_(a_.kernel(), std::move(args), frame_).status());
    for (int i = 0; i < a_.out_specs_size(); ++i) {
      if (!a_.out_specs(i).whole()) CopyBlock(outputs_[i], blocks[i], out_windows[i], false);
    }
    return absl::OkStatus();
  }

  // Runs the index map of `spec` and checks that the block starts inside the array.
  absl::StatusOr<BlockWindow> Window(const ir::BlockSpec& spec, const ir::ShapedType& array,
                                     const std::string& name) {
    std::vector<ir::Tensor> args;
    for (int64_t i : frame_.index) args.push_back(Index(i, allocator_));
    args.insert(args.end(), prefetch_.begin(), prefetch_.end());
    ASSIGN_OR_RETURN(std::vector<ir::Tensor> indices,
                     run_(spec.index_map(), std::move(args), frame_));
    BlockWindow w;
    std::vector<int64_t> blocks;
    for (int d = 0; d < array.rank(); ++d) {
      const int64_t extent = ir::BlockExtent(spec, d);
      const int64_t index = IndexValue(indices[d], 0);
      blocks.push_back(index);
      const int64_t start = index * extent;
      w.start.push_back(start);
      w.extent.push_back(extent);
      w.valid.push_back(std::clamp<int64_t>(array.dims[d] - start, 0, extent));
    }
    for (int d = 0; d < array.rank(); ++d) {
      if (w.start[d] < 0 || (w.start[d] >= array.dims[d] && array.dims[d] > 0)) {
        return BlockOutsideArray(frame_.Where(), name, blocks, w.start[d], d, array);
      }
    }
    return w;
  }

  KernelPeers* peers_;
  const ir::Op& op_;
  const ir::PallasCallAttrs& a_;
  const std::vector<ir::Tensor>& operands_;
  const KernelRegionRunner& run_;
  ir::Allocator* allocator_;
  // The operands sizing grid axes at run time come first.
  int64_t base_;
  KernelFrame frame_;
  std::vector<ir::Tensor> prefetch_;
  std::vector<ir::Tensor> outputs_;
  std::vector<ir::Tensor> scratch_;
  std::unordered_map<int, ir::Tensor> whole_inputs_;
};

// The window of a ref_load / ref_store: starts from operands[first..], checked against the ref.
absl::StatusOr<BlockWindow> RefWindow(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                                      size_t first, const KernelFrame& frame) {
  const ir::Tensor& ref = operands[0];
  BlockWindow w;
  for (int64_t d = 0; d < static_cast<int64_t>(ref.dims().size()); ++d) {
    const int64_t start = IndexValue(operands[first + d], 0);
    const int64_t size = op.ref_window().sizes(d);
    w.start.push_back(start);
    w.extent.push_back(size);
    w.valid.push_back(size);
  }
  for (size_t d = 0; d < w.start.size(); ++d) {
    if (w.start[d] < 0 || w.start[d] + w.extent[d] > ref.dims()[d]) {
      auto it = frame.ref_names.find(op.operands(0));
      return WindowOutsideRef(
          op, frame.Where(), w.start, w.extent,
          it != frame.ref_names.end() ? it->second : "ref " + ir::ValueName(op.operands(0)),
          ref.type());
    }
  }
  return w;
}

// The kernel param of ref operand `k` of `op` and how errors name it.
int ParamOf(const ir::Op& op, int k, const KernelFrame& frame) {
  auto it = frame.param_of.find(op.operands(k));
  return it != frame.param_of.end() ? it->second : -1;
}
std::string RefName(const ir::Op& op, int k, const KernelFrame& frame) {
  auto it = frame.ref_names.find(op.operands(k));
  return it != frame.ref_names.end() ? it->second : "ref " + ir::ValueName(op.operands(k));
}

// A semaphore operand at `k` with its indices: its slot, and its name ("scratch ref 2[1]").
struct SemaphoreRef {
  SemaphoreSlot slot;
  std::string name;
  size_t next = 0;  // the operand after the indices
};

absl::StatusOr<SemaphoreRef> SemaphoreOperand(const ir::Op& op,
                                              const std::vector<ir::Tensor>& operands, size_t k,
                                              const KernelFrame& frame) {
  const ir::Tensor& sem = operands[k];
  const int64_t rank = static_cast<int64_t>(sem.dims().size());
  std::vector<int64_t> index;
  int64_t flat = 0;
  for (int64_t d = 0; d < rank; ++d) {
    index.push_back(IndexValue(operands[k + 1 + d], 0));
    flat = flat * sem.dims()[d] + index.back();
  }
  SemaphoreRef r{{ParamOf(op, static_cast<int>(k), frame), flat},
                 fmt::format("{}[{}]", RefName(op, static_cast<int>(k), frame),
                             absl::StrJoin(index, ",")),
                 k + 1 + rank};
  for (int64_t d = 0; d < rank; ++d) {
    if (index[d] < 0 || index[d] >= sem.dims()[d]) {
      return absl::OutOfRangeError(fmt::format("{}: {}: semaphore index ({}) is outside {}",
                                               op.opcode(), frame.Where(),
                                               absl::StrJoin(index, ","), sem.type().ToString()));
    }
  }
  if (frame.peers == nullptr || r.slot.param < 0) {
    return absl::InternalError(fmt::format("{}: {}: {} is not a semaphore of the kernel",
                                           op.opcode(), frame.Where(), r.name));
  }
  return r;
}

// The device the trailing operands from `k` name (this one when there are none).
absl::StatusOr<int64_t> Target(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                               size_t k,
                               const google::protobuf::RepeatedPtrField<std::string>& axes,
                               bool logical, const KernelFrame& frame) {
  std::vector<int64_t> values;
  for (size_t i = k; i < operands.size(); ++i) values.push_back(IndexValue(operands[i], 0));
  return TargetPosition(frame.peers->mesh(), frame.peers->position(),
                        {axes.begin(), axes.end()}, logical, values,
                        fmt::format("{}: {}", op.opcode(), frame.Where()));
}

// A dma_start window: where it starts in its ref and the strides (elements) of the dimensions
// the copied value keeps.
absl::StatusOr<Window> DmaWindowAt(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                                   size_t k,
                                   const google::protobuf::RepeatedField<int64_t>& sizes,
                                   const google::protobuf::RepeatedField<int64_t>& squeezed,
                                   const KernelFrame& frame) {
  const ir::Tensor& ref = operands[k];
  const std::vector<int64_t> strides = ir::RowMajorStrides(ref.dims());
  std::vector<int64_t> starts, extents;
  Window w;
  for (size_t d = 0; d < ref.dims().size(); ++d) {
    starts.push_back(IndexValue(operands[k + 1 + d], 0));
    extents.push_back(sizes[d]);
    w.offset += starts.back() * strides[d];
    if (std::find(squeezed.begin(), squeezed.end(), static_cast<int64_t>(d)) == squeezed.end()) {
      w.strides.push_back(strides[d]);
    }
  }
  for (size_t d = 0; d < starts.size(); ++d) {
    if (starts[d] < 0 || starts[d] + extents[d] > ref.dims()[d]) {
      return WindowOutsideRef(op, frame.Where(), starts, extents,
                              RefName(op, static_cast<int>(k), frame), ref.type());
    }
  }
  return w;
}

absl::Status DmaStart(const ir::Op& op, const std::vector<ir::Tensor>& operands,
                      const KernelFrame& frame) {
  const ir::DmaAttrs& a = op.dma();
  const ir::Tensor& src = operands[0];
  const size_t dst = 1 + src.dims().size();
  ASSIGN_OR_RETURN(Window from, DmaWindowAt(op, operands, 0, a.src_sizes(), a.src_squeezed(),
                                            frame));
  ASSIGN_OR_RETURN(Window to, DmaWindowAt(op, operands, dst, a.dst_sizes(), a.dst_squeezed(),
                                          frame));
  ASSIGN_OR_RETURN(SemaphoreRef dst_sem,
                   SemaphoreOperand(op, operands, dst + 1 + operands[dst].dims().size(), frame));
  size_t k = dst_sem.next;
  std::optional<SemaphoreRef> src_sem;
  if (a.has_src_sem()) {
    ASSIGN_OR_RETURN(src_sem, SemaphoreOperand(op, operands, k, frame));
    k = src_sem->next;
  }
  ASSIGN_OR_RETURN(int64_t target,
                   Target(op, operands, k, a.device_axes(), a.logical_device(), frame));
  std::vector<int64_t> value_dims;
  for (int d = 0; d < a.src_sizes_size(); ++d) {
    if (std::find(a.src_squeezed().begin(), a.src_squeezed().end(), d) == a.src_squeezed().end()) {
      value_dims.push_back(a.src_sizes(d));
    }
  }
  const WindowCopy copy{src.data(), from, value_dims, ir::DTypeSize(src.dtype()),
                        operands[dst].type().Array(), to};
  return StartDma(*frame.peers, target, copy, const_cast<void*>(operands[dst].data()),
                  ParamOf(op, static_cast<int>(dst), frame), dst_sem.slot,
                  src_sem ? &src_sem->slot : nullptr,
                  fmt::format("{}: {}", op.opcode(), frame.Where()));
}

}  // namespace

void FillWithPadding(ir::Tensor& t) {
  const ir::Tensor one = ir::Tensor::FromDoubles({t.dtype(), {}}, {ir::PaddingValue(t.dtype())});
  FillElements(t.data(), t.num_elements(), one.data(), ir::DTypeSize(t.dtype()));
}

ir::Tensor PaddingArray(const ir::ShapedType& type, ir::Allocator* allocator) {
  ir::Tensor t = ir::Tensor::Empty(type.Array(), allocator);
  FillWithPadding(t);
  return t;
}

std::vector<int64_t> GridSizes(const ir::PallasCallAttrs& a,
                               const std::vector<ir::Tensor>& operands) {
  std::vector<int64_t> grid;
  int next = 0;
  for (int64_t g : a.grid()) {
    grid.push_back(g != -1 ? g : std::max<int64_t>(0, IndexValue(operands[next++], 0)));
  }
  return grid;
}

std::string KernelWhere(const ir::Op& call, const std::vector<int64_t>& index) {
  const std::string& name = call.pallas_call().name();
  return fmt::format("kernel {} at grid index ({})", name.empty() ? "(unnamed)" : name,
                     absl::StrJoin(index, ","));
}

std::string KernelRefName(const ir::PallasCallAttrs& a, int param) {
  const int nsp = static_cast<int>(a.num_scalar_prefetch());
  const int fixed = nsp + a.in_specs_size() + a.out_specs_size();
  if (param < nsp) return fmt::format("scalar-prefetch ref {}", param);
  if (param < nsp + a.in_specs_size()) return fmt::format("in_specs[{}] block", param - nsp);
  if (param < fixed) return fmt::format("out_specs[{}] block", param - nsp - a.in_specs_size());
  return fmt::format("scratch ref {}", param - fixed);
}

absl::Status BlockOutsideArray(const std::string& where, const std::string& spec_name,
                               const std::vector<int64_t>& blocks, int64_t start, int dim,
                               const ir::ShapedType& array) {
  return absl::OutOfRangeError(fmt::format(
      "pallas_call: {}: {} index_map gives block indices ({}), so the block starts at element {} "
      "of dimension {}, outside the array {}",
      where, spec_name, absl::StrJoin(blocks, ","), start, dim, array.ToString()));
}

absl::Status WindowOutsideRef(const ir::Op& op, const std::string& where,
                              const std::vector<int64_t>& starts,
                              const std::vector<int64_t>& sizes, const std::string& ref_name,
                              const ir::ShapedType& ref) {
  return absl::OutOfRangeError(fmt::format(
      "{}: {}: the window at ({}) of sizes ({}) leaves the {} of shape {}", op.opcode(), where,
      absl::StrJoin(starts, ","), absl::StrJoin(sizes, ","), ref_name, ref.Array().ToString()));
}

absl::StatusOr<std::vector<ir::Tensor>> RunPallasCall(const ir::Op& op,
                                                      const std::vector<ir::Tensor>& operands,
                                                      const KernelRegionRunner& run,
                                                      ir::Allocator* allocator,
                                                      KernelPeers* peers) {
  return GridRun(op, operands, run, allocator, peers).Run();
}

absl::StatusOr<std::vector<ir::Tensor>> RunKernelOp(const ir::Op& op,
                                                    const std::vector<ir::Tensor>& operands,
                                                    const KernelFrame& frame,
                                                    ir::Allocator* allocator) {
  switch (ir::PrimOf(op)) {
    case ir::Prim::kProgramId:
      return std::vector<ir::Tensor>{Index(frame.index.at(op.grid_axis().axis()), allocator)};
    case ir::Prim::kNumPrograms:
      return std::vector<ir::Tensor>{
          Index(frame.grid.at(op.grid_axis().axis()), allocator)};
    case ir::Prim::kRefLoad: {
      ASSIGN_OR_RETURN(BlockWindow w, RefWindow(op, operands, 1, frame));
      ir::Tensor ref = operands[0];
      ir::Tensor out = ir::Tensor::Empty(ResultType(op), allocator);
      CopyBlock(ref, out, w, /*into_block=*/true);
      return std::vector<ir::Tensor>{std::move(out)};
    }
    case ir::Prim::kRefStore: {
      ASSIGN_OR_RETURN(BlockWindow w, RefWindow(op, operands, 2, frame));
      ir::Tensor ref = operands[0];
      ir::Tensor value = operands[1];
      CopyBlock(ref, value, w, /*into_block=*/false);
      return std::vector<ir::Tensor>{};
    }
    case ir::Prim::kSemaphoreSignal: {
      ASSIGN_OR_RETURN(SemaphoreRef sem, SemaphoreOperand(op, operands, 0, frame));
      const ir::SemaphoreSignalAttrs& a = op.semaphore_signal();
      ASSIGN_OR_RETURN(int64_t target, Target(op, operands, sem.next + 1, a.device_axes(),
                                              a.logical_device(), frame));
      RETURN_IF_ERROR(frame.peers->Signal(target, sem.slot, IndexValue(operands[sem.next], 0),
                                          fmt::format("{}: {}", op.opcode(), frame.Where())));
      return std::vector<ir::Tensor>{};
    }
    case ir::Prim::kSemaphoreWait:
    case ir::Prim::kDmaWait: {
      ASSIGN_OR_RETURN(SemaphoreRef sem, SemaphoreOperand(op, operands, 0, frame));
      const int64_t n = op.has_dma_wait() ? op.dma_wait().bytes()
                                          : IndexValue(operands[sem.next], 0);
      RETURN_IF_ERROR(frame.peers->Wait(sem.slot, n,
                                        fmt::format("{}: {}", op.opcode(), frame.Where()),
                                        sem.name));
      return std::vector<ir::Tensor>{};
    }
    case ir::Prim::kSemaphoreRead: {
      ASSIGN_OR_RETURN(SemaphoreRef sem, SemaphoreOperand(op, operands, 0, frame));
      return std::vector<ir::Tensor>{Index(frame.peers->Read(sem.slot), allocator)};
    }
    case ir::Prim::kDmaStart:
      RETURN_IF_ERROR(DmaStart(op, operands, frame));
      return std::vector<ir::Tensor>{};
    default:
      return absl::InternalError(fmt::format("{} is not a kernel op", op.opcode()));
  }
}

}  // namespace shardjit::backends::reference
