#include "backends/x86/pallas_padding.h"

#include <algorithm>

#include "ir/pallas.h"

namespace shardjit::backends::x86::pallas {
namespace {

std::atomic<int64_t> padded_blocks{0};

}  // namespace

int64_t PaddedOutputBlocks() { return padded_blocks.load(); }

LazyPadding::LazyPadding(const ir::BlockSpec& spec, const View& array)
    : array_(array),
      value_(ir::Tensor::FromDoubles({array.dtype, {}}, {ir::PaddingValue(array.dtype)})) {
  for (size_t d = 0; d < array.dims.size(); ++d) {
    const int64_t extent = ir::BlockExtent(spec, static_cast<int>(d));
    extent_.push_back(extent);
    count_.push_back((array.dims[d] + extent - 1) / extent);
    blocks_ *= count_.back();
  }
  state_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(blocks_));
  for (int64_t i = 0; i < blocks_; ++i) state_[i].store(kUntouched, std::memory_order_relaxed);
}

LazyPadding::Block LazyPadding::At(absl::Span<const int64_t> blocks) {
  Block b{this, 0, {array_.data, {}, {}, array_.dtype}};
  const int64_t elem = ir::DTypeSize(array_.dtype);
  for (size_t d = 0; d < blocks.size(); ++d) {
    b.index = b.index * count_[d] + blocks[d];
    const int64_t start = blocks[d] * extent_[d];
    b.inside.data += start * array_.strides[d] * elem;
    b.inside.dims.push_back(std::min(extent_[d], array_.dims[d] - start));
    b.inside.strides.push_back(array_.strides[d]);
  }
  return b;
}

// A block's state is read without the lock only to skip finished blocks (acquire: their padding
// is visible); every change happens under the lock, after checking the state again.
void LazyPadding::Touch(const Block& b) {
  if (state_[b.index].load(std::memory_order_acquire) == kDone) return;
  absl::MutexLock lock(&mu_);
  if (state_[b.index].load(std::memory_order_relaxed) != kDone) FillUnwritten(b);
}

void LazyPadding::StoreRows(const Block& b, const View& window, int64_t lo, int64_t hi) {
  if (state_[b.index].load(std::memory_order_acquire) == kDone || lo >= hi) return;
  const View& in = b.inside;
  // The whole block (its squeezed dims, if any, left out of the window).
  int64_t window_elements = 1, inside_elements = 1;
  for (int64_t d : window.dims) window_elements *= d;
  for (int64_t d : in.dims) inside_elements *= d;
  if (window.data == in.data && window_elements == inside_elements && lo == 0 &&
      hi == RowsOf(window)) {
    absl::MutexLock lock(&mu_);
    written_.erase(b.index);
    state_[b.index].store(kDone, std::memory_order_release);
    return;
  }
  // The window's first row in the block, when it spans the block's other dims whole.
  const int64_t offset = (window.data - in.data) / ir::DTypeSize(in.dtype);
  bool rows = window.dims.size() == in.dims.size() && !in.dims.empty() && offset >= 0 &&
              offset % in.strides[0] == 0;
  for (size_t d = 1; rows && d < in.dims.size(); ++d) rows = window.dims[d] == in.dims[d];
  const int64_t first = rows ? offset / in.strides[0] : 0;
  rows = rows && first + RowsOf(window) <= in.dims[0];
  absl::MutexLock lock(&mu_);
  if (state_[b.index].load(std::memory_order_relaxed) == kDone) return;
  if (!rows) {
    FillUnwritten(b);
    return;
  }
  std::vector<bool>& written = written_[b.index];
  written.resize(in.dims[0], false);
  std::fill(written.begin() + first + lo, written.begin() + first + hi, true);
  const bool all = std::find(written.begin(), written.end(), false) == written.end();
  if (all) written_.erase(b.index);
  state_[b.index].store(all ? kDone : kSomeRows, std::memory_order_release);
}

void LazyPadding::FillUnwritten(const Block& b) {
  const View& in = b.inside;
  auto it = written_.find(b.index);
  if (it == written_.end()) {
    Fill(in);
  } else {
    // Runs of rows no store wrote.
    const std::vector<bool>& written = it->second;
    const int64_t rows = in.dims[0], elem = ir::DTypeSize(in.dtype);
    for (int64_t r = 0; r < rows;) {
      if (written[r]) {
        ++r;
        continue;
      }
      int64_t end = r;
      while (end < rows && !written[end]) ++end;
      View run = in;
      run.data += r * in.strides[0] * elem;
      run.dims[0] = end - r;
      Fill(run);
      r = end;
    }
    written_.erase(it);
  }
  ++padded_blocks;
  state_[b.index].store(kDone, std::memory_order_release);
}

void LazyPadding::FillUntouched() {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> blocks(count_.size(), 0);
  for (int64_t i = 0; i < blocks_; ++i) {
    if (state_[i].load(std::memory_order_relaxed) != kDone) FillUnwritten(At(blocks));
    for (int64_t d = static_cast<int64_t>(blocks.size()) - 1; d >= 0; --d) {
      if (++blocks[d] < count_[d]) break;
      blocks[d] = 0;
    }
  }
}

void LazyPadding::Fill(const View& v) const { FillView(v, value_.data()); }

}  // namespace shardjit::backends::x86::pallas
