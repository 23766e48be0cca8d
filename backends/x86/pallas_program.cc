#include "backends/x86/pallas_program.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "backends/reference/pallas.h"
#include "backends/reference/strided_copy.h"
#include "ir/pallas.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {

namespace {

// A fresh output: Pallas' padding in every element, written by `parallel`'s threads.
ir::Tensor PaddingOutput(const ir::ShapedType& type, ir::Allocator* allocator,
                         const base::Parallelism& parallel) {
  ir::Tensor t = ir::Tensor::Empty(type, allocator);
  const ir::Tensor one = ir::Tensor::FromDoubles({t.dtype(), {}}, {ir::PaddingValue(t.dtype())});
  const int64_t elem = ir::DTypeSize(t.dtype()), n = t.num_elements();
  const int parts = static_cast<int>(std::clamp<int64_t>(n / (int64_t{1} << 16), 1,
                                                         parallel.available()));
  auto fill = [&](int p) {
    const int64_t begin = n * p / parts, end = n * (p + 1) / parts;
    reference::FillElements(static_cast<char*>(t.data()) + begin * elem, end - begin, one.data(),
                            elem);
  };
  if (parts == 1) {
    fill(0);
  } else {
    parallel.ParallelFor(parts, fill);
  }
  return t;
}

}  // namespace

namespace {

std::atomic<int64_t> rows_skipped_in_all{0};
std::atomic<int64_t> gemms_run_in_all{0};

}  // namespace

int64_t GemmRowsSkipped() { return rows_skipped_in_all.load(); }
int64_t DeferredGemmsRun() { return gemms_run_in_all.load(); }

absl::Status CompiledCall::RunStep(Frame& f) const {
  for (size_t d = 0; d < grid_slots.size(); ++d) f.scalars[grid_slots[d]] = f.index[d];
  f.writebacks.clear();
  for (size_t k = 0; k < specs.size(); ++k) {
    const SpecPlan& s = specs[k];
    if (s.spec->whole()) continue;
    RETURN_IF_ERROR(RunProgram(s.index_map, f));
    const View& array = f.arrays[k];
    const int64_t elem = ir::DTypeSize(array.dtype);
    View block{array.data, {}, {}, array.dtype};
    View& inside = f.inside[k];  // the part of the block inside the array
    inside.dims.clear();
    bool overhangs = false;
    for (size_t d = 0; d < array.dims.size(); ++d) {
      const int64_t extent = ir::BlockExtent(*s.spec, static_cast<int>(d));
      const int64_t start = f.scalars[s.index_results[d]] * extent;
      const int64_t dim = array.dims[d];
      if (start < 0 || (start >= dim && dim > 0)) {
        std::vector<int64_t> blocks;
        for (int slot : s.index_results) blocks.push_back(f.scalars[slot]);
        return reference::BlockOutsideArray(
            reference::KernelWhere(*op, f.index), s.name, blocks, start, static_cast<int>(d),
            ir::ShapedType{array.dtype, {array.dims.begin(), array.dims.end()}});
      }
      block.data += start * array.strides[d] * elem;
      inside.dims.push_back(std::min(extent, dim - start));
      overhangs |= inside.dims.back() < extent;
      if (s.spec->block_shape(d) != 0) {
        block.dims.push_back(extent);
        block.strides.push_back(array.strides[d]);
      }
    }
    if (LazyPadding* lazy = f.lazy[k]) {
      Dims blocks;
      for (int slot : s.index_results) blocks.push_back(f.scalars[slot]);
      f.output_blocks[s.ref] = lazy->At(blocks);
      // A padded copy reads the block first.
      if (overhangs) f.TouchOutput(s.ref, f.output_blocks[s.ref]->inside, OutputAccess::kRead);
    }
    if (!overhangs && !s.copy) {
      f.refs[s.ref] = std::move(block);
      continue;
    }
    // A copy: padding, then the part inside the array.
    inside.data = block.data;
    inside.strides = array.strides;
    inside.dtype = array.dtype;
    ir::Tensor& buffer = f.padded[k];
    if (!buffer.defined()) {
      buffer = ir::Tensor::Empty(ir::ShapedType{array.dtype, ir::BlockRefDims(*s.spec)},
                                 f.allocator);
    }
    reference::FillWithPadding(buffer);
    CopyView({static_cast<char*>(buffer.data()), inside.dims, s.padded_strides, array.dtype},
             inside);
    f.refs[s.ref] = DenseView(buffer);
    if (s.output) f.writebacks.push_back(static_cast<int>(k));
  }
  RETURN_IF_ERROR(RunProgram(kernel, f));
  if (!f.writebacks.empty()) RETURN_IF_ERROR(f.deferred.SettleAll());
  for (int k : f.writebacks) {
    const View& inside = f.inside[k];
    CopyView(inside, {static_cast<char*>(f.padded[k].data()), inside.dims,
                      specs[k].padded_strides, inside.dtype});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ir::Tensor>> CompiledCall::Run(const std::vector<ir::Tensor>& operands,
                                                          ir::Allocator* allocator) const {
  // Read before anything can park (backends/kernel_peers.h).
  KernelPeers* peers = CurrentKernelPeers();
  const ir::PallasCallAttrs& a = op->pallas_call();
  const int nsp = static_cast<int>(a.num_scalar_prefetch());
  const int64_t base = ir::NumDynamicGridAxes(a);  // operands sizing grid axes come first
  const ir::Region& kernel_region = a.kernel();
  const std::vector<int64_t> grid = reference::GridSizes(a, operands);
  std::vector<ir::Tensor> prefetch;
  for (int i = 0; i < nsp; ++i) prefetch.push_back(operands[base + i].Copy(allocator));
  std::vector<ir::Tensor> inputs(operands.begin() + base + nsp, operands.end());
  for (const SpecPlan& s : specs) {
    if (!s.output && s.copy && s.spec->whole()) {
      inputs[s.array] = inputs[s.array].Copy(allocator);
    }
  }
  // A fresh output of blocked spec gets its padding lazily (not in a kernel whose peers may
  // write into it).
  std::vector<ir::Tensor> outputs;
  std::vector<std::unique_ptr<LazyPadding>> lazy(specs.size());
  for (int i = 0; i < a.out_shapes_size(); ++i) {
    const int64_t alias = i < a.input_output_aliases_size() ? a.input_output_aliases(i) : -1;
    const ir::ShapedType type = ir::FromProto(a.out_shapes(i));
    auto spec = std::find_if(specs.begin(), specs.end(),
                             [&](const SpecPlan& s) { return s.output && s.array == i; });
    if (alias >= 0) {
      outputs.push_back(operands[base + alias].Copy(allocator));
    } else if (!has_semaphores && spec != specs.end() && !spec->spec->whole()) {
      outputs.push_back(ir::Tensor::Empty(type, allocator));
      lazy[spec - specs.begin()] =
          std::make_unique<LazyPadding>(*spec->spec, DenseView(outputs.back()));
    } else {
      outputs.push_back(PaddingOutput(type, allocator, base::CurrentParallelism()));
    }
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a.grid_size(); ++d) (d < leading_parallel ? outer : inner) *= grid[d];
  if (outer * inner == 0 && !has_semaphores) return outputs;  // an instance is met even then
  const base::Parallelism& parallel = base::CurrentParallelism();
  const int threads = static_cast<int>(std::min<int64_t>(parallel.available(), outer));
  std::vector<absl::Status> status(threads);
  auto run_thread = [&](int t) {
    Frame f;
    f.allocator = allocator;
    f.scalars.assign(num_scalars, 0);
    f.tiles.resize(num_tiles);
    f.views.resize(num_views);
    f.refs.resize(num_refs);
    f.output_blocks.resize(num_refs);
    f.lazy.resize(specs.size());
    for (size_t k = 0; k < specs.size(); ++k) f.lazy[k] = lazy[k].get();
    f.padded.resize(specs.size());
    f.inside.resize(specs.size());
    for (const SpecPlan& s : specs) {
      f.arrays.push_back(DenseView(s.output ? outputs[s.array] : inputs[s.array]));
    }
    f.index.assign(a.grid_size(), 0);
    f.grid = grid;
    // One grid thread: the GEMMs may use the program's threads; several: each its own.
    if (threads == 1) f.gemm_parallel = parallel;
    f.gemm_parallel.stop = parallel.stop;
    for (int p = 0; p < nsp; ++p) f.refs[p] = DenseView(prefetch[p]);
    if (f.gemm_parallel.available() == 1) {
      f.pack_cache = std::make_unique<GemmPackCache>(allocator);
    }
    for (const SpecPlan& s : specs) {
      if (s.output || s.copy) continue;
      const char* begin = static_cast<const char*>(inputs[s.array].data());
      f.immutable.push_back({begin, begin + inputs[s.array].byte_size()});
    }
    for (size_t k = 0; k < specs.size(); ++k) {
      if (specs[k].spec->whole()) f.refs[specs[k].ref] = f.arrays[k];
    }
    const int fixed = nsp + a.in_specs_size() + a.out_specs_size();
    f.deferred.set_first_scratch(fixed);
    for (int p = fixed; p < kernel_region.params_size(); ++p) {
      f.scratch.push_back(
          reference::PaddingArray(ir::FromProto(kernel_region.params(p).type()), allocator));
      f.refs[p] = DenseView(f.scratch.back());
    }
    f.peers = peers;
    // A kernel with semaphores is an instance its peers signal and copy into (its grid runs on
    // this one thread).
    std::optional<LocalKernelPeers> alone;
    if (has_semaphores) {
      if (f.peers == nullptr) f.peers = &alone.emplace();
      const std::vector<bool> written = ir::DmaDestinations(a);
      std::vector<KernelBuffer> buffers;
      for (int p = 0; p < kernel_region.params_size(); ++p) {
        const ir::ShapedType type = ir::FromProto(kernel_region.params(p).type());
        buffers.push_back({nullptr, type});
        const bool blocked = p >= nsp && p < fixed && !specs[p - nsp].spec->whole();
        const bool input = p < nsp + a.in_specs_size();
        if ((written[p] || !input) && !blocked) buffers.back().data = f.refs[p].data;
      }
      if (absl::Status s = f.peers->Enter(*op, std::move(buffers)); !s.ok()) {
        status[t] = s;
        return;
      }
    }
    // Every exit below leaves the instance (with this thread's outcome).
    struct Leave {
      KernelPeers* peers;
      const absl::Status* outcome;
      ~Leave() {
        if (peers != nullptr) peers->Exit(*outcome);
      }
    } leave{has_semaphores ? f.peers : nullptr, &status[t]};
    const int64_t begin = outer * t / threads, end = outer * (t + 1) / threads;
    for (int64_t step = begin * inner; step < end * inner; ++step) {
      if (absl::Status s = parallel.stop.Check(); !s.ok()) {
        status[t] = s;
        return;
      }
      int64_t rest = step;
      for (int d = a.grid_size() - 1; d >= 0; --d) {
        f.index[d] = rest % grid[d];
        rest /= grid[d];
      }
      if (absl::Status s = RunStep(f); !s.ok()) {
        status[t] = s;
        return;
      }
    }
    status[t] = f.deferred.SettleAtEnd();
    rows_skipped_in_all += f.deferred.rows_skipped();
    gemms_run_in_all += f.deferred.gemms_run();
  };
  if (threads == 1) {
    run_thread(0);
  } else {
    parallel.ParallelFor(threads, run_thread);
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  for (const auto& l : lazy) {
    if (l != nullptr) l->FillUntouched();
  }
  return outputs;
}

}  // namespace shardjit::backends::x86::pallas
