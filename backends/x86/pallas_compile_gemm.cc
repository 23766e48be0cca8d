// The pallas_call compiler (backends/x86/pallas_compiler.h): tile dots as GEMM steps, accumulating
// into a ref in place, deferred (backends/x86/pallas_deferred.h).
#include "backends/x86/pallas_compiler.h"

#include <algorithm>
#include <cstring>

#include "backends/x86/gemm.h"
#include "base/status_macros.h"
#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {

using ir::Prim;

std::optional<Compiler::Accumulation> Compiler::MatchAccumulation(const ir::Region& region,
                                                                  int add,
                                                                  const Uses& uses) const {
  const ir::Op& op = region.ops(add);
  if (ir::PrimOf(op) != Prim::kAdd || op.result_types(0).dtype() != ir::F32) return std::nullopt;
  std::unordered_map<int64_t, int> producer;
  for (int i = 0; i < add; ++i) {
    for (int64_t id : region.ops(i).results()) producer[id] = i;
  }
  for (int side = 0; side < 2; ++side) {
    auto l = producer.find(op.operands(side));
    auto d = producer.find(op.operands(1 - side));
    if (l == producer.end() || d == producer.end()) continue;
    const ir::Op& load = region.ops(l->second);
    const ir::Op& dot = region.ops(d->second);
    if (ir::PrimOf(load) != Prim::kRefLoad || ir::PrimOf(dot) != Prim::kDotGeneral) continue;
    if (uses.count.at(op.operands(side)) != 1 || uses.count.at(op.operands(1 - side)) != 1 ||
        uses.count.at(op.results(0)) != 1) {
      continue;
    }
    const int store = uses.last.at(op.results(0));
    if (store >= region.ops_size()) continue;
    const ir::Op& st = region.ops(store);
    if (ir::PrimOf(st) != Prim::kRefStore || st.operands(1) != op.results(0) ||
        st.operands(0) != load.operands(0) ||
        st.ref_window().SerializeAsString() != load.ref_window().SerializeAsString() ||
        !std::equal(st.operands().begin() + 2, st.operands().end(),
                    load.operands().begin() + 1, load.operands().end())) {
      continue;
    }
    // Nothing between the load or the dot and the store may touch R (the GEMM updates it at
    // the dot), and the dot must not read R.
    const int ref = ref_of_.at(load.operands(0));
    bool clear = true;
    for (int i = std::min(l->second, d->second) + 1; i < store && clear; ++i) {
      clear = i == l->second || !Touches(region.ops(i), ref);
    }
    for (int64_t id : dot.operands()) {
      auto m = masked_.find(id);
      for (int64_t read : {id, m != masked_.end() ? m->second.value : id}) {
        auto v = view_ref_.find(read);
        clear = clear && (v == view_ref_.end() || v->second != ref);
      }
    }
    if (!clear) continue;
    return Accumulation{l->second, d->second, store};
  }
  return std::nullopt;
}

bool Compiler::RunsAsGemm(const ir::Op& dot) const {
  const ir::DotGeneralAttrs& d = dot.dot_general();
  const ir::ShapedType lhs = values_.at(dot.operands(0)).type;
  const ir::ShapedType rhs = values_.at(dot.operands(1)).type;
  const ir::DType out = static_cast<ir::DType>(dot.result_types(0).dtype());
  return d.lhs_batch_dims_size() == 0 && d.lhs_contracting_dims_size() == 1 && lhs.rank() == 2 &&
         rhs.rank() == 2 && lhs.dtype == rhs.dtype &&
         (lhs.dtype == ir::DType::kF32 || lhs.dtype == ir::DType::kBF16) &&
         (out == ir::DType::kF32 || out == ir::DType::kBF16);
}

// A GEMM step for dot_general `op` writing C through `out`; with `accumulate_ref` >= 0,
// accumulating into that ref's window (and deferred while later steps continue it).
// `at`: the index of the dot in the current region. An operand that is a masked select of
// zeros (MaskedUse) is read through its mask: when both operands' masks constrain only the
// contracting dimension, to the same range, the GEMM runs over that depth; otherwise over a
// zero-filled copy of the mask's elements.
absl::StatusOr<Step> Compiler::GemmStep(const ir::Op& op,
                                        std::function<absl::StatusOr<View>(Frame&)> out,
                                        int accumulate_ref, int at) {
  const bool accumulate = accumulate_ref >= 0;
  const ir::DotGeneralAttrs& d = op.dot_general();
  if (!RunsAsGemm(op)) return Unsupported("a dot GEMMs cannot run");
  const ir::ShapedType lhs = values_.at(op.operands(0)).type;
  const ir::ShapedType rhs = values_.at(op.operands(1)).type;
  const ir::ShapedType result = ir::FromProto(op.result_types(0));
  const int cl = static_cast<int>(d.lhs_contracting_dims(0));
  const int cr = static_cast<int>(d.rhs_contracting_dims(0));
  struct Operand {
    std::function<View(Frame&)> view;
    Mask mask;
    bool depth_only = false;  // the mask constrains only the contracting dimension
  };
  auto operand = [&](int k, int contracting) -> Operand {
    const int64_t id = op.operands(k);
    const MaskedSelect* s = MaskedUse(id, at);
    if (s == nullptr || !s->zero_otherwise) return {ViewReader(id), {}, false};
    symbolic_uses_[id].insert({&op, k});
    return {ViewReader(s->value), s->mask, MaskedDims(s->mask) == std::vector<int>{contracting}};
  };
  const Operand a = operand(0, cl);
  const Operand b = operand(1, cr);
  const GemmType type =
      lhs.dtype == ir::DType::kF32 ? GemmType::kF32F32F32 : GemmType::kBf16Bf16F32;
  const bool out_bf16 = result.dtype == ir::DType::kBF16;
  const GemmShape full{lhs.dims[1 - cl], rhs.dims[1 - cr], lhs.dims[cl]};
  const int64_t elem = ir::DTypeSize(lhs.dtype);
  return Step([=](Frame& f) -> absl::Status {
    ASSIGN_OR_RETURN(View c, out(f));
    if (full.m == 0 || full.n == 0) return absl::OkStatus();
    View va = a.view(f);
    View vb = b.view(f);
    GemmShape shape = full;
    ir::Tensor a_copy, b_copy;  // zero-filled masked operands
    if (!a.mask.empty() || !b.mask.empty()) {
      std::optional<MaskBox> ma, mb;
      if (!a.mask.empty()) ma = EvalMask(a.mask, va.dims, f);
      if (!b.mask.empty()) mb = EvalMask(b.mask, vb.dims, f);
      if (a.depth_only && b.depth_only && ma->intervals && mb->intervals &&
          ma->lo[cl] == mb->lo[cr] && ma->hi[cl] == mb->hi[cr]) {
        va.data += ma->lo[cl] * va.strides[cl] * elem;
        vb.data += mb->lo[cr] * vb.strides[cr] * elem;
        shape.k = ma->hi[cl] - ma->lo[cl];
      } else {
        if (ma) va = MaskedCopy(va, *ma, a_copy, f.allocator);
        if (mb) vb = MaskedCopy(vb, *mb, b_copy, f.allocator);
      }
    }
    if (shape.k == 0) {
      if (!accumulate) std::memset(c.data, 0, shape.m * shape.n * ir::DTypeSize(c.dtype));
      return absl::OkStatus();
    }
    GemmArgs g;
    g.shape = shape;
    g.type = type;
    g.a = va.data;
    g.a_row_stride = va.strides[1 - cl];
    g.a_col_stride = va.strides[cl];
    g.b = vb.data;
    g.b_row_stride = vb.strides[cr];
    g.b_col_stride = vb.strides[1 - cr];
    g.c = c.data;
    g.ldc = c.strides[0];
    g.out_bf16 = out_bf16;
    g.accumulate = accumulate;
    g.parallel = f.gemm_parallel;
    // The same bits whether the grid's products merge across one thread's tiles or two's.
    g.fixed_depth_blocks = true;
    // Keep packed blocks of A: a row of blocks serves every column block of the grid while it
    // is still in L2 (packing it afresh each time is most of a kernel's packing). B's blocks
    // serve only along the row axis: packed afresh.
    if (f.pack_cache != nullptr && type != GemmType::kS8S8S32) {
      g.pack_cache = f.pack_cache.get();
      g.cache_a = f.Immutable(va);
    }
    if (accumulate && !out_bf16 && f.Immutable(va) && f.Immutable(vb)) {
      return f.deferred.AddGemm(accumulate_ref, g);
    }
    RETURN_IF_ERROR(f.deferred.SettleAll());
    return Gemm(g);
  });
}

}  // namespace shardjit::backends::x86::pallas
