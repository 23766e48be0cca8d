// Pallas' padding values in a fresh output, written lazily (backends/x86/pallas_program.h): a
// block gets them when the kernel first reads it or writes part of it, never when a store first
// overwrites it whole; stores of whole rows of a block (megablox's masked stores of a group's
// rows) are recorded, and only the rows none wrote get padding, when the block is read or written
// otherwise or when the grid ends; the blocks no step touched get it then too. A kernel that
// writes every row of an output (a matmul's tiles, gmm's groups, tgmm's group blocks) never
// fills it. Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
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
  // The kernel reads block `b`, or writes part of it: the block gets its padding first (in the
  // rows no store wrote), if it has none yet.
  void Touch(const Block& b);
  // A store overwrites `window` of block `b` whole: when the window is whole rows of the block,
  // those rows are recorded as written; otherwise as Touch.
  void Store(const Block& b, const View& window) { StoreRows(b, window, 0, RowsOf(window)); }
  // The same for rows [lo, hi) of `window` alone (a masked store).
  void StoreRows(const Block& b, const View& window, int64_t lo, int64_t hi);
  // Writes the padding of every block (or row) no step touched.
  void FillUntouched();

 private:
  enum State : uint8_t { kUntouched, kDone, kSomeRows };
  static int64_t RowsOf(const View& v) { return v.dims.empty() ? 1 : v.dims[0]; }
  // Pads the rows of block `b` no store wrote, and forgets them.
  void FillUnwritten(const Block& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fill(const View& v) const;

  View array_;
  std::vector<int64_t> extent_, count_;  // per dim: block extent, blocks
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  int64_t blocks_ = 1;
  ir::Tensor value_;  // one element of padding
  absl::Mutex mu_;
  // Per block in state kSomeRows: which of its rows (inside the array) stores wrote.
  absl::flat_hash_map<int64_t, std::vector<bool>> written_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_PADDING_H_
