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
  touched_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(blocks_));
  for (int64_t i = 0; i < blocks_; ++i) touched_[i].store(0, std::memory_order_relaxed);
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

void LazyPadding::Touch(const Block& b, const View& window, bool whole_store) {
  if (touched_[b.index].load(std::memory_order_relaxed) != 0) return;
  // A whole store: the window spans every element of the block inside the array.
  int64_t window_elements = 1, inside_elements = 1;
  for (int64_t d : window.dims) window_elements *= d;
  for (int64_t d : b.inside.dims) inside_elements *= d;
  const bool whole = whole_store && window.data == b.inside.data &&
                     window_elements == inside_elements;
  if (!whole) Fill(b.inside);
  touched_[b.index].store(1, std::memory_order_relaxed);
}

void LazyPadding::FillUntouched() {
  std::vector<int64_t> blocks(count_.size(), 0);
  for (int64_t i = 0; i < blocks_; ++i) {
    if (touched_[i].load(std::memory_order_relaxed) == 0) Fill(At(blocks).inside);
    for (int64_t d = static_cast<int64_t>(blocks.size()) - 1; d >= 0; --d) {
      if (++blocks[d] < count_[d]) break;
      blocks[d] = 0;
    }
  }
}

void LazyPadding::Fill(const View& v) const {
  FillView(v, value_.data());
  ++padded_blocks;
}

}  // namespace shardjit::backends::x86::pallas
