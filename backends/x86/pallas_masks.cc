#include "backends/x86/pallas_masks.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "ir/prim.h"
#include "ir/types.h"

namespace shardjit::backends::x86::pallas {
namespace {

int64_t Wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

bool Compare(ir::ComparisonDirection d, int64_t a, int64_t b) {
  switch (d) {
    case ir::EQ:
      return a == b;
    case ir::NE:
      return a != b;
    case ir::LT:
      return a < b;
    case ir::LE:
      return a <= b;
    case ir::GT:
      return a > b;
    default:
      return a >= b;
  }
}

int64_t ElementOffset(const View& v, const Dims& index) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * v.strides[d];
  return off * ir::DTypeSize(v.dtype);
}

// The dimension along which constant `c` of `type` counts 0, 1, ... (a folded iota), if any.
std::optional<int> IotaDim(const ir::TensorType& type, const ir::ConstantAttrs& c) {
  const int rank = type.dims_size();
  int64_t n = 1;
  for (int64_t d : type.dims()) n *= d;
  if (rank == 0 || c.value_size() != n) return std::nullopt;
  for (int d = 0; d < rank; ++d) {
    int64_t inner = 1;  // elements per step of dim d
    for (int e = d + 1; e < rank; ++e) inner *= type.dims(e);
    bool iota = true;
    for (int64_t i = 0; i < n && iota; ++i) {
      iota = c.value(static_cast<int>(i)) == static_cast<double>((i / inner) % type.dims(d));
    }
    if (iota) return d;
  }
  return std::nullopt;
}

// Constant `c` of pred `type` as a mask, when its true elements form a box (a folded
// comparison of iotas with constants, such as `iota < 5`).
std::optional<Mask> BoxMask(const ir::TensorType& type, const ir::ConstantAttrs& c) {
  const int rank = type.dims_size();
  int64_t n = 1;
  for (int64_t d : type.dims()) n *= d;
  if (rank == 0 || n == 0 || c.value_size() != n) return std::nullopt;
  auto value = [&](int64_t i) { return c.value(static_cast<int>(i)) != 0; };
  auto index = [&](int64_t i, int d) {
    int64_t inner = 1;
    for (int e = d + 1; e < rank; ++e) inner *= type.dims(e);
    return (i / inner) % type.dims(d);
  };
  std::vector<int64_t> lo(type.dims().begin(), type.dims().end()), hi(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (!value(i)) continue;
    for (int d = 0; d < rank; ++d) {
      lo[d] = std::min(lo[d], index(i, d));
      hi[d] = std::max(hi[d], index(i, d) + 1);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    bool inside = true;
    for (int d = 0; d < rank && inside; ++d) inside = index(i, d) >= lo[d] && index(i, d) < hi[d];
    if (inside != value(i)) return std::nullopt;
  }
  Mask mask;
  auto condition = [&](int d, ir::ComparisonDirection direction, int64_t bound) {
    IndexCondition k;
    k.dim = d;
    k.direction = direction;
    k.bound = {-1, bound};
    mask.push_back(std::move(k));
  };
  if (hi[0] == 0) {  // no element holds
    condition(0, ir::LT, 0);
    return mask;
  }
  for (int d = 0; d < rank; ++d) {
    if (lo[d] > 0) condition(d, ir::GE, lo[d]);
    if (hi[d] < type.dims(d)) condition(d, ir::LT, hi[d]);
  }
  if (mask.empty()) condition(0, ir::GE, 0);  // every element holds
  return mask;
}

}  // namespace

std::vector<int> MaskedDims(const Mask& mask) {
  std::set<int> dims;
  for (const IndexCondition& c : mask) dims.insert(c.dim);
  return {dims.begin(), dims.end()};
}

namespace {

// The indices i in [0, n) where condition `c` holds, when they are one interval that closed form
// gives: no partial sum of i and the offsets leaves s32, and the direction is not NE.
std::optional<std::pair<int64_t, int64_t>> ConditionInterval(const IndexCondition& c, int64_t n,
                                                             const Frame& f) {
  constexpr int64_t kMin = INT32_MIN, kMax = INT32_MAX;
  int64_t sum = 0;
  for (const ScalarTerm& o : c.offsets) {
    sum += o.Eval(f);
    if (sum < kMin || sum + n - 1 > kMax) return std::nullopt;
  }
  ir::ComparisonDirection d = c.direction;
  if (!c.index_on_left) {  // bound <d> v  is  v <d'> bound
    d = d == ir::LT   ? ir::GT
        : d == ir::GT ? ir::LT
        : d == ir::LE ? ir::GE
        : d == ir::GE ? ir::LE
                      : d;
  }
  const int64_t t = c.bound.Eval(f) - sum;  // v <d> bound  is  i <d> t
  switch (d) {
    case ir::LT:
      return std::make_pair(int64_t{0}, t);
    case ir::LE:
      return std::make_pair(int64_t{0}, t + 1);
    case ir::GT:
      return std::make_pair(t + 1, n);
    case ir::GE:
      return std::make_pair(t, n);
    case ir::EQ:
      return std::make_pair(t, t + 1);
    default:
      return std::nullopt;
  }
}

}  // namespace

MaskBox EvalMask(const Mask& mask, const Dims& dims, const Frame& f) {
  const int rank = static_cast<int>(dims.size());
  MaskBox box;
  box.lo.assign(rank, 0);
  box.hi = dims;
  bool closed = true;
  for (const IndexCondition& c : mask) {
    auto interval = ConditionInterval(c, dims[c.dim], f);
    if (!interval) {
      closed = false;
      break;
    }
    box.lo[c.dim] = std::max(box.lo[c.dim], interval->first);
    box.hi[c.dim] = std::min(box.hi[c.dim], interval->second);
  }
  if (closed) {
    for (int d = 0; d < rank; ++d) {
      if (box.lo[d] >= box.hi[d]) box.lo[d] = box.hi[d] = 0;
    }
    return box;
  }
  // Index by index, as the elementwise ops compute the mask.
  std::vector<std::vector<bool>> truth(rank);
  for (int d = 0; d < rank; ++d) truth[d].assign(dims[d], true);
  for (const IndexCondition& c : mask) {
    const int64_t bound = c.bound.Eval(f);
    std::vector<int64_t> offsets;
    for (const ScalarTerm& o : c.offsets) offsets.push_back(o.Eval(f));
    std::vector<bool>& t = truth[c.dim];
    for (int64_t i = 0; i < dims[c.dim]; ++i) {
      int64_t v = i;
      for (int64_t o : offsets) v = Wrap32(v + o);
      t[i] = t[i] && (c.index_on_left ? Compare(c.direction, v, bound)
                                      : Compare(c.direction, bound, v));
    }
  }
  for (int d = 0; d < rank; ++d) {
    const std::vector<bool>& t = truth[d];
    const int64_t n = dims[d];
    int64_t lo = 0;
    while (lo < n && !t[lo]) ++lo;
    int64_t hi = lo;
    while (hi < n && t[hi]) ++hi;
    for (int64_t i = hi; i < n && box.intervals; ++i) box.intervals = !t[i];
    if (lo == n) lo = hi = 0;
    box.lo[d] = lo;
    box.hi[d] = hi;
  }
  if (!box.intervals) box.truth = std::move(truth);
  return box;
}

View SubView(const View& v, const Dims& lo, const Dims& hi) {
  View s{v.data + ElementOffset(v, lo), {}, v.strides, v.dtype};
  for (size_t d = 0; d < lo.size(); ++d) s.dims.push_back(hi[d] - lo[d]);
  return s;
}

void CopyWhere(const View& dst, const View& src, const MaskBox& box) {
  const bool narrow = dst.dtype != src.dtype;  // f32 into bf16, rounded to nearest even
  const int rank = static_cast<int>(dst.dims.size());
  if (box.intervals && !narrow) {
    CopyView(SubView(dst, box.lo, box.hi), SubView(src, box.lo, box.hi));
    return;
  }
  for (int64_t d : dst.dims) {
    if (d == 0) return;
  }
  const int64_t elem = ir::DTypeSize(dst.dtype);
  Dims index(rank, 0);
  while (true) {
    bool inside = true;
    for (int d = 0; d < rank && inside; ++d) {
      inside = box.intervals ? index[d] >= box.lo[d] && index[d] < box.hi[d]
                             : box.truth[d][index[d]];
    }
    if (inside && narrow) {
      float f;
      std::memcpy(&f, src.data + ElementOffset(src, index), 4);
      const uint16_t b = ir::bf16::FromFloat(f);
      std::memcpy(dst.data + ElementOffset(dst, index), &b, 2);
    } else if (inside) {
      std::memcpy(dst.data + ElementOffset(dst, index), src.data + ElementOffset(src, index), elem);
    }
    int d = rank - 1;
    for (; d >= 0; --d) {
      if (++index[d] < dst.dims[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

View MaskedCopy(const View& src, const MaskBox& box, ir::Tensor& storage,
                ir::Allocator* allocator) {
  storage = ir::Tensor::Empty(
      ir::ShapedType{src.dtype, std::vector<int64_t>(src.dims.begin(), src.dims.end())}, allocator);
  std::memset(storage.data(), 0, storage.byte_size());  // +0 of every dtype
  View dense = DenseView(storage);
  CopyWhere(dense, src, box);
  return dense;
}

const Mask* MaskSymbols::MaskOf(int64_t id) const {
  auto it = symbols_.find(id);
  return it != symbols_.end() && it->second.kind == Symbol::Kind::kMask ? &it->second.mask
                                                                         : nullptr;
}

MaskSymbols::Lookup MaskSymbols::Outer() const {
  return [this](int64_t id) -> std::optional<Symbol> {
    if (auto it = symbols_.find(id); it != symbols_.end()) return it->second;
    if (std::optional<ScalarTerm> s = scalar_(id)) return Symbol{Symbol::Kind::kScalar, *s};
    return std::nullopt;
  };
}

void MaskSymbols::Analyze(const ir::Op& op) {
  if (std::optional<Symbol> s = Of(op, Outer())) symbols_[op.results(0)] = std::move(*s);
}

std::optional<MaskSymbols::Select> MaskSymbols::SelectOf(const ir::Op& op) const {
  if (op.results_size() != 1) return std::nullopt;
  if (ir::PrimOf(op) == ir::Prim::kSelect) {
    const Mask* mask = MaskOf(op.operands(0));
    if (mask == nullptr) return std::nullopt;
    return Select{*mask, op.operands(1), op.operands(2)};
  }
  if (ir::PrimOf(op) != ir::Prim::kFusion) return std::nullopt;
  const ir::Region& body = op.fusion().body();
  if (body.params_size() != op.operands_size() || body.results_size() != 1 ||
      body.ops_size() == 0) {
    return std::nullopt;
  }
  // The body op defining `id`, or null (a param).
  auto defining = [&](int64_t id) -> const ir::Op* {
    for (const ir::Op& o : body.ops()) {
      if (o.results_size() == 1 && o.results(0) == id) return &o;
    }
    return nullptr;
  };
  auto dtype_of = [&](int64_t id) {
    for (const auto& p : body.params()) {
      if (p.id() == id) return p.type().dtype();
    }
    const ir::Op* o = defining(id);
    return o != nullptr ? o->result_types(0).dtype() : ir::DTypeProto{};
  };
  // Whether `o` converts a `from` value to `to`.
  auto convert_of = [&](const ir::Op* o, ir::DTypeProto from, ir::DTypeProto to) {
    return o != nullptr && ir::PrimOf(*o) == ir::Prim::kConvertElementType &&
           o->operands_size() == 1 && o->result_types(0).dtype() == to &&
           dtype_of(o->operands(0)) == from;
  };
  const ir::Op* root = defining(body.results(0));
  ir::DType narrow = ir::DType::kInvalid;
  if (root != nullptr && convert_of(root, ir::F32, ir::BF16)) {
    narrow = ir::DType::kBF16;
    root = defining(root->operands(0));
  }
  if (root == nullptr || ir::PrimOf(*root) != ir::Prim::kSelect) return std::nullopt;
  // The outer operand a body param stands for.
  auto outer = [&](int64_t param) -> std::optional<int64_t> {
    for (int k = 0; k < body.params_size(); ++k) {
      if (body.params(k).id() == param) return op.operands(k);
    }
    return std::nullopt;
  };
  int64_t otherwise_param = root->operands(2);
  if (narrow != ir::DType::kInvalid) {
    // The old bf16 values widened: storing them back narrowed gives them exactly.
    const ir::Op* widen = defining(otherwise_param);
    if (!convert_of(widen, ir::BF16, ir::F32)) return std::nullopt;
    otherwise_param = widen->operands(0);
  }
  std::optional<int64_t> value = outer(root->operands(1)), otherwise = outer(otherwise_param);
  if (!value || !otherwise) return std::nullopt;
  const std::unordered_map<int64_t, Symbol> inner = BodySymbols(op, Outer());
  auto mask = inner.find(root->operands(0));
  if (mask == inner.end() || mask->second.kind != Symbol::Kind::kMask) return std::nullopt;
  return Select{mask->second.mask, *value, *otherwise, narrow};
}

std::unordered_map<int64_t, MaskSymbols::Symbol> MaskSymbols::BodySymbols(const ir::Op& op,
                                                                          const Lookup& operand) {
  const ir::Region& body = op.fusion().body();
  std::unordered_map<int64_t, Symbol> inner;
  if (body.params_size() != op.operands_size()) return inner;
  for (int k = 0; k < body.params_size(); ++k) {
    if (std::optional<Symbol> s = operand(op.operands(k))) inner[body.params(k).id()] = *s;
  }
  auto lookup = [&inner](int64_t id) -> std::optional<Symbol> {
    auto it = inner.find(id);
    return it != inner.end() ? std::optional<Symbol>(it->second) : std::nullopt;
  };
  for (const ir::Op& o : body.ops()) {
    if (std::optional<Symbol> s = Of(o, lookup)) inner[o.results(0)] = std::move(*s);
  }
  return inner;
}

std::optional<MaskSymbols::Symbol> MaskSymbols::Of(const ir::Op& op, const Lookup& operand) {
  using Kind = Symbol::Kind;
  if (op.results_size() != 1 || op.result_types_size() != 1) return std::nullopt;
  const ir::TensorType& type = op.result_types(0);
  const bool s32 = type.dtype() == ir::S32;
  const bool scalar = type.dims_size() == 0;
  auto args = [&]() -> std::optional<std::pair<Symbol, Symbol>> {
    if (op.operands_size() != 2) return std::nullopt;
    std::optional<Symbol> x = operand(op.operands(0)), y = operand(op.operands(1));
    if (!x || !y) return std::nullopt;
    return std::make_pair(*std::move(x), *std::move(y));
  };
  switch (ir::PrimOf(op)) {
    case ir::Prim::kConstant:
      if (type.dtype() == ir::PRED) {
        std::optional<Mask> box = BoxMask(type, op.constant());
        if (!box) return std::nullopt;
        Symbol s{Kind::kMask};
        s.mask = *std::move(box);
        return s;
      }
      if (!s32) return std::nullopt;
      if (op.constant().value_size() == 1) {
        return Symbol{scalar ? Kind::kScalar : Kind::kSplat,
                      {-1, static_cast<int64_t>(op.constant().value(0))}};
      }
      if (std::optional<int> dim = IotaDim(type, op.constant())) {
        return Symbol{Kind::kIota, {}, *dim};
      }
      return std::nullopt;
    case ir::Prim::kIota:
      if (!s32) return std::nullopt;
      return Symbol{Kind::kIota, {}, static_cast<int>(op.iota().dimension())};
    case ir::Prim::kBroadcastInDim: {
      std::optional<Symbol> x = operand(op.operands(0));
      if (!s32 || !x || (x->kind != Kind::kScalar && x->kind != Kind::kSplat)) return std::nullopt;
      return Symbol{Kind::kSplat, x->value};
    }
    case ir::Prim::kAdd: {
      auto xy = args();
      if (!s32 || scalar || !xy) return std::nullopt;
      auto& [x, y] = *xy;
      if (x.kind == Kind::kSplat && y.kind == Kind::kIota) std::swap(x, y);
      if (x.kind != Kind::kIota || y.kind != Kind::kSplat) return std::nullopt;
      x.offsets.push_back(y.value);
      return x;
    }
    case ir::Prim::kCompare: {
      auto xy = args();
      if (scalar || !xy) return std::nullopt;
      const auto& [x, y] = *xy;
      IndexCondition c;
      c.direction = op.compare().direction();
      c.index_on_left = x.kind == Kind::kIota;
      const Symbol& index = c.index_on_left ? x : y;
      const Symbol& bound = c.index_on_left ? y : x;
      if (index.kind != Kind::kIota || bound.kind != Kind::kSplat) return std::nullopt;
      c.dim = index.dim;
      c.offsets = index.offsets;
      c.bound = bound.value;
      Symbol s{Kind::kMask};
      s.mask.push_back(std::move(c));
      return s;
    }
    case ir::Prim::kAnd: {
      auto xy = args();
      if (scalar || !xy || xy->first.kind != Kind::kMask || xy->second.kind != Kind::kMask) {
        return std::nullopt;
      }
      Symbol s = std::move(xy->first);
      for (IndexCondition& c : xy->second.mask) s.mask.push_back(std::move(c));
      return s;
    }
    case ir::Prim::kFusion: {
      if (op.fusion().body().results_size() != 1) return std::nullopt;
      std::unordered_map<int64_t, Symbol> inner = BodySymbols(op, operand);
      auto it = inner.find(op.fusion().body().results(0));
      if (it == inner.end()) return std::nullopt;
      return std::move(it->second);
    }
    default:
      return std::nullopt;
  }
}

}  // namespace shardjit::backends::x86::pallas
