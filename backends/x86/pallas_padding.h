// Pallas' padding values in a fresh output, written lazily (backends/x86/pallas_program.h): a
// block gets them when the kernel first reads it or writes part of it, never when a store first
// overwrites it whole; the blocks no step touched get them when the grid ends. A kernel that
// writes every block of an output (a matmul's tiles, tgmm's group blocks) never fills it.
// Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "backends/x86/pallas_view.h"
#include "ir/ir.pb.h"
#include "ir/tensor.h"

namespace shardjit::backends::x86::pallas {

// Output blocks given their padding so far, in every grid (PallasCallStats).
int64_t PaddedOutputBlocks();

class LazyPadding {
 public:
  // The blocks of `spec` (blocked) over `array`, a fresh output.
  LazyPadding(const ir::BlockSpec& spec, const View& array);

  // The block at block indices `blocks` (inside the array).
  struct Block {
    LazyPadding* owner = nullptr;
    int64_t index = 0;
    View inside;  // its elements inside the array
  };
  Block At(absl::Span<const int64_t> blocks);
  // The kernel accesses `window` of block `b`: unless this is a store overwriting the whole
  // block (`whole_store`), the block gets its padding first, if it has none yet.
  void Touch(const Block& b, const View& window, bool whole_store);
  // Writes the padding of every block no step touched.
  void FillUntouched();

 private:
  void Fill(const View& v) const;

  View array_;
  std::vector<int64_t> extent_, count_;  // per dim: block extent, blocks
  std::unique_ptr<std::atomic<uint8_t>[]> touched_;
  int64_t blocks_ = 1;
  ir::Tensor value_;  // one element of padding
};

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_
