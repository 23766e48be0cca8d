#include "backends/x86/pallas_deferred.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/status_macros.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86::pallas {
namespace {

// More deferred GEMMs than this run, oldest first (GEMMs that merge with nothing, e.g. into
// windows of an output that are not neighbours).
constexpr size_t kMaxGemms = 16;

// Memory a window or a GEMM's C occupies: `rows` rows of `cols` elements of `elem` bytes, rows
// `pitch` elements apart; or, when !rect, the bytes from `data` to end() (a view of another form).
struct Area {
  const char* data = nullptr;
  int64_t rows = 0, cols = 0, pitch = 0;
  int64_t elem = 1;
  bool rect = true;
  bool empty() const { return rows == 0 || cols == 0; }
  const char* end() const { return data + ((rows - 1) * pitch + cols) * elem; }
};

Area AreaOf(const View& v) {
  Area a;
  a.data = v.data;
  a.elem = ir::DTypeSize(v.dtype);
  for (int64_t d : v.dims) {
    if (d == 0) return a;
  }
  const size_t rank = v.dims.size();
  if (rank == 0 || (rank == 1 && v.strides[0] == 1)) {
    a.rows = 1;
    a.cols = rank == 0 ? 1 : v.dims[0];
    a.pitch = a.cols;
    return a;
  }
  if (rank == 2 && v.strides[1] == 1 && v.strides[0] >= v.dims[1]) {
    a.rows = v.dims[0];
    a.cols = v.dims[1];
    a.pitch = v.strides[0];
    return a;
  }
  // Another form: the span of its elements (strides of views are not negative).
  int64_t last = 0;
  for (size_t d = 0; d < rank; ++d) last += (v.dims[d] - 1) * v.strides[d];
  a.rect = false;
  a.rows = 1;
  a.cols = last + 1;
  a.pitch = a.cols;
  return a;
}

// Bytes of an element of a GEMM's C: f32, or bf16 when it rounds (out_bf16).
int64_t CBytes(const GemmArgs& g) { return g.out_bf16 ? 2 : 4; }

Area AreaOf(const GemmArgs& g) {
  return {static_cast<const char*>(g.c), g.shape.m, g.shape.n, g.ldc, CBytes(g), true};
}

// Where `inner` starts in `outer` in whole rows and columns, when both are rectangles of the
// same pitch and element size and no row of `inner` wraps past the pitch.
std::optional<std::pair<int64_t, int64_t>> Offset(const Area& outer, const Area& inner) {
  if (!outer.rect || !inner.rect || outer.pitch != inner.pitch || outer.elem != inner.elem ||
      outer.pitch <= 0) {
    return std::nullopt;
  }
  const int64_t bytes = inner.data - outer.data;
  if (bytes % outer.elem != 0) return std::nullopt;
  const int64_t d = bytes / outer.elem;
  const int64_t row = d >= 0 ? d / outer.pitch : -((-d + outer.pitch - 1) / outer.pitch);
  const int64_t col = d - row * outer.pitch;
  if (col + inner.cols > outer.pitch) return std::nullopt;
  return std::pair{row, col};
}

bool Overlap(const Area& x, const Area& y) {
  if (x.empty() || y.empty()) return false;
  if (const auto at = Offset(x, y)) {
    const auto [row, col] = *at;
    return row < x.rows && row + y.rows > 0 && col < x.cols && col + y.cols > 0;
  }
  return x.data < y.end() && y.data < x.end();
}

bool Inside(const Area& inner, const Area& outer) {
  if (inner.empty()) return true;
  const auto at = Offset(outer, inner);
  return at && at->first >= 0 && at->second >= 0 && at->first + inner.rows <= outer.rows &&
         at->second + inner.cols <= outer.cols;
}

bool Same(const Area& a, const Area& b) {
  return a.rect && b.rect && a.data == b.data && a.rows == b.rows && a.cols == b.cols &&
         a.pitch == b.pitch && a.elem == b.elem;
}

void FillZeros(const View& window) {
  constexpr float kZero = 0.0f;
  FillView(window, &kZero);
}

const char* At(const void* p, int64_t elements, int64_t bytes) {
  return static_cast<const char*>(p) + elements * bytes;
}

// Whether product `next` continues `g` along k: the same C window, shapes and strides, its A and
// B the blocks just past g's along k.
bool Continues(const GemmArgs& g, const GemmArgs& next) {
  const int64_t elem = GemmInputBytes(next.type);
  return g.type == next.type && g.c == next.c && g.ldc == next.ldc &&
         g.shape.m == next.shape.m && g.shape.n == next.shape.n &&
         g.a_row_stride == next.a_row_stride && g.a_col_stride == next.a_col_stride &&
         g.b_row_stride == next.b_row_stride && g.b_col_stride == next.b_col_stride &&
         static_cast<const char*>(next.a) == At(g.a, g.shape.k * g.a_col_stride, elem) &&
         static_cast<const char*>(next.b) == At(g.b, g.shape.k * g.b_row_stride, elem);
}

// `second` merged into `first` when it extends it to the right (the same A, the next columns of
// B and C) or below (the same B, the next rows of A and C); false otherwise.
bool Extend(GemmArgs& first, const GemmArgs& second) {
  const int64_t elem = GemmInputBytes(first.type);
  const bool alike = first.type == second.type && first.accumulate == second.accumulate &&
                     first.out_bf16 == second.out_bf16 &&
                     first.ldc == second.ldc && first.shape.k == second.shape.k &&
                     first.a_row_stride == second.a_row_stride &&
                     first.a_col_stride == second.a_col_stride &&
                     first.b_row_stride == second.b_row_stride &&
                     first.b_col_stride == second.b_col_stride && first.a_row_stride != 0;
  if (!alike) return false;
  const char* c_first = static_cast<const char*>(first.c);
  const char* c_second = static_cast<const char*>(second.c);
  if (first.a == second.a && first.shape.m == second.shape.m &&
      static_cast<const char*>(second.b) == At(first.b, first.shape.n * first.b_col_stride, elem) &&
      c_second == c_first + first.shape.n * CBytes(first)) {
    first.shape.n += second.shape.n;
  } else if (first.b == second.b && first.shape.n == second.shape.n &&
             static_cast<const char*>(second.a) ==
                 At(first.a, first.shape.m * first.a_row_stride, elem) &&
             c_second == c_first + first.shape.m * first.ldc * CBytes(first)) {
    first.shape.m += second.shape.m;
  } else {
    return false;
  }
  return true;
}

// Rows [lo, hi) of product `g`.
GemmArgs RowsOf(const GemmArgs& g, int64_t lo, int64_t hi) {
  GemmArgs r = g;
  r.a_row_stride = g.a_row_stride != 0 ? g.a_row_stride : g.shape.k;  // 0: dense rows
  r.a = At(g.a, lo * r.a_row_stride, GemmInputBytes(g.type));
  r.c = static_cast<char*>(g.c) + lo * g.ldc * CBytes(g);
  r.shape.m = hi - lo;
  return r;
}

}  // namespace

absl::Status DeferredWrites::RunGemm(size_t i) {
  const GemmArgs g = gemms_[i].args;
  gemms_.erase(gemms_.begin() + static_cast<std::ptrdiff_t>(i));
  ++gemms_run_;
  return Gemm(g);
}

absl::Status DeferredWrites::RunGemmsOverlapping(const View& w) {
  const Area area = AreaOf(w);
  for (size_t i = 0; i < gemms_.size();) {
    if (Overlap(AreaOf(gemms_[i].args), area)) {
      RETURN_IF_ERROR(RunGemm(i));
    } else {
      ++i;
    }
  }
  return absl::OkStatus();
}

absl::Status DeferredWrites::MakeCopy(size_t i) {
  const DeferredCopy copy = copies_[i];
  copies_.erase(copies_.begin() + static_cast<std::ptrdiff_t>(i));
  RETURN_IF_ERROR(Settle(copy.from));
  CopyView(copy.window, copy.from);
  return absl::OkStatus();
}

absl::Status DeferredWrites::CopiesFrom(const View& w) {
  const Area area = AreaOf(w);
  for (size_t i = 0; i < copies_.size();) {
    if (Overlap(AreaOf(copies_[i].from), area)) {
      RETURN_IF_ERROR(MakeCopy(i));
      i = 0;  // the list changed
    } else {
      ++i;
    }
  }
  return absl::OkStatus();
}

absl::Status DeferredWrites::SettleCopiesAndFills(const View& w) {
  const Area area = AreaOf(w);
  // What reads w's old contents, then what writes them (no two deferred writes overlap).
  RETURN_IF_ERROR(CopiesFrom(w));
  for (size_t i = 0; i < copies_.size();) {
    if (Overlap(AreaOf(copies_[i].window), area)) {
      RETURN_IF_ERROR(MakeCopy(i));
      i = 0;
    } else {
      ++i;
    }
  }
  std::erase_if(fills_, [&](const DeferredFill& f) {
    if (!Overlap(AreaOf(f.window), area)) return false;
    FillZeros(f.window);
    return true;
  });
  return absl::OkStatus();
}

absl::Status DeferredWrites::Settle(const View& w) {
  RETURN_IF_ERROR(SettleCopiesAndFills(w));
  return RunGemmsOverlapping(w);
}

absl::Status DeferredWrites::AddGemm(int ref, GemmArgs g) {
  for (DeferredGemm& d : gemms_) {
    if (d.ref == ref && Continues(d.args, g)) {
      d.args.shape.k += g.shape.k;
      return absl::OkStatus();
    }
  }
  const Area c = AreaOf(g);
  auto fill = std::find_if(fills_.begin(), fills_.end(),
                           [&](const DeferredFill& f) { return Same(AreaOf(f.window), c); });
  if (fill != fills_.end() && g.accumulate) {
    fills_.erase(fill);
    g.accumulate = false;
  }
  View window{static_cast<char*>(g.c), {g.shape.m, g.shape.n}, {g.ldc, 1}, ir::DType::kF32};
  RETURN_IF_ERROR(Settle(window));
  gemms_.push_back({g, ref});
  Merge(gemms_.size() - 1);
  if (gemms_.size() > kMaxGemms) RETURN_IF_ERROR(RunGemm(0));
  return absl::OkStatus();
}

absl::StatusOr<bool> DeferredWrites::Overwrite(int ref, const View& w, bool zero_f32) {
  const Area area = AreaOf(w);
  RETURN_IF_ERROR(CopiesFrom(w));
  std::erase_if(gemms_, [&](const DeferredGemm& d) {
    if (!Inside(AreaOf(d.args), area)) return false;
    rows_skipped_ += d.args.shape.m;
    return true;
  });
  std::erase_if(fills_, [&](const DeferredFill& f) { return Inside(AreaOf(f.window), area); });
  std::erase_if(copies_, [&](const DeferredCopy& c) { return Inside(AreaOf(c.window), area); });
  RETURN_IF_ERROR(Settle(w));
  if (!zero_f32 || !Scratch(ref) || !area.rect || w.dtype != ir::DType::kF32) return false;
  fills_.push_back({ref, w});
  return true;
}

absl::Status DeferredWrites::SettleRows(const View& v, int64_t lo, int64_t hi) {
  const Area area = AreaOf(v);
  RETURN_IF_ERROR(SettleCopiesAndFills(v));
  std::vector<DeferredGemm> gemms = std::move(gemms_);
  gemms_.clear();
  for (const DeferredGemm& d : gemms) {
    const Area c = AreaOf(d.args);
    if (!Overlap(c, area)) {
      gemms_.push_back(d);
      continue;
    }
    const auto at = Offset(c, area);
    if (!at) {
      ++gemms_run_;
      RETURN_IF_ERROR(Gemm(d.args));
      continue;
    }
    // Rows [lo, hi) of v are rows [lo + row, hi + row) of C.
    const int64_t m = d.args.shape.m;
    const int64_t a = std::clamp<int64_t>(lo + at->first, 0, m);
    const int64_t b = std::clamp<int64_t>(hi + at->first, a, m);
    if (a > 0) gemms_.push_back({RowsOf(d.args, 0, a), d.ref});
    if (b > a) {
      ++gemms_run_;
      RETURN_IF_ERROR(Gemm(RowsOf(d.args, a, b)));
    }
    if (b < m) gemms_.push_back({RowsOf(d.args, b, m), d.ref});
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> DeferredWrites::MoveInto(int from, const View& src, int to, const View& dst) {
  const Area s = AreaOf(src);
  if (s.empty()) return false;
  return MoveRowsInto(from, src, 0, s.rows, to, dst);
}

absl::StatusOr<bool> DeferredWrites::MoveRowsInto(int from, const View& src, int64_t lo,
                                                  int64_t hi, int to, const View& dst) {
  const Area s = AreaOf(src), d = AreaOf(dst);
  // A bf16 destination gets the GEMM's f32 sums rounded once (the store's narrowing).
  const bool narrow = dst.dtype == ir::DType::kBF16;
  if (!s.rect || !d.rect || s.empty() || s.rows != d.rows || s.cols != d.cols ||
      src.dtype != ir::DType::kF32 || (dst.dtype != ir::DType::kF32 && !narrow) ||
      Overlap(s, d) || lo < 0 || hi > s.rows || lo >= hi) {
    return false;
  }
  for (const DeferredFill& f : fills_) {
    if (Overlap(AreaOf(f.window), s)) return false;
  }
  // src's rows never receive the GEMM's result: nothing may read or write them later but through
  // the deferred copy this makes.
  for (const DeferredCopy& c : copies_) {
    if (Overlap(AreaOf(c.window), s) || Overlap(AreaOf(c.from), s)) return false;
  }
  std::optional<size_t> only;
  for (size_t i = 0; i < gemms_.size(); ++i) {
    if (!Overlap(AreaOf(gemms_[i].args), s)) continue;
    if (only || !Same(AreaOf(gemms_[i].args), s) || gemms_[i].args.accumulate) return false;
    only = i;
  }
  if (!only) return false;
  const DeferredGemm g = gemms_[*only];
  gemms_.erase(gemms_.begin() + static_cast<std::ptrdiff_t>(*only));
  // The rows outside [lo, hi) stay deferred where they were; with a bf16 destination, those rows
  // too (the source must keep f32 values, which the rounded rows cannot give back).
  if (narrow) {
    gemms_.push_back(g);
  } else {
    if (lo > 0) gemms_.push_back({RowsOf(g.args, 0, lo), from});
    if (hi < s.rows) gemms_.push_back({RowsOf(g.args, hi, s.rows), from});
  }
  auto rows = [&](const View& v, const Area& a) {
    return View{v.data + lo * a.pitch * a.elem, {hi - lo, a.cols}, {a.pitch, 1}, v.dtype};
  };
  const View src_rows = rows(src, s), dst_rows = rows(dst, d);
  // The store overwrites dst's rows: what is deferred there goes first (dropped when inside).
  absl::StatusOr<bool> cleared = Overwrite(to, dst_rows, /*zero_f32=*/false);
  if (!cleared.ok()) return cleared.status();
  DeferredGemm moved{RowsOf(g.args, lo, hi), to};
  moved.args.c = dst_rows.data;
  moved.args.ldc = d.pitch;
  moved.args.out_bf16 = narrow;
  gemms_.push_back(moved);
  if (!narrow) copies_.push_back({from, src_rows, dst_rows});
  Merge(gemms_.size() - 1);
  if (gemms_.size() > kMaxGemms) RETURN_IF_ERROR(RunGemm(0));
  return true;
}

void DeferredWrites::Merge(size_t i) {
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t j = 0; j < gemms_.size() && !merged; ++j) {
      if (j == i || gemms_[j].ref != gemms_[i].ref) continue;
      if (Extend(gemms_[j].args, gemms_[i].args)) {
        gemms_.erase(gemms_.begin() + static_cast<std::ptrdiff_t>(i));
        i = j < i ? j : j - 1;
        merged = true;
      } else if (Extend(gemms_[i].args, gemms_[j].args)) {
        gemms_.erase(gemms_.begin() + static_cast<std::ptrdiff_t>(j));
        if (j < i) --i;
        merged = true;
      }
    }
  }
}

absl::Status DeferredWrites::SettleAll() {
  // Copies first: each settles its source (and so the GEMMs writing it) before it copies.
  while (!copies_.empty()) RETURN_IF_ERROR(MakeCopy(0));
  while (!gemms_.empty()) RETURN_IF_ERROR(RunGemm(0));
  for (const DeferredFill& f : fills_) FillZeros(f.window);
  fills_.clear();
  return absl::OkStatus();
}

absl::Status DeferredWrites::SettleAtEnd() {
  std::erase_if(gemms_, [&](const DeferredGemm& d) {
    if (!Scratch(d.ref)) return false;
    rows_skipped_ += d.args.shape.m;
    return true;
  });
  std::erase_if(fills_, [&](const DeferredFill& f) { return Scratch(f.ref); });
  std::erase_if(copies_, [&](const DeferredCopy& c) { return Scratch(c.ref); });
  return SettleAll();
}

}  // namespace shardjit::backends::x86::pallas
