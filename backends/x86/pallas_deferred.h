// Writes a thread running a pallas_call grid has not made yet (backends/x86/pallas_program.h):
// GEMMs accumulating into a ref's window, zero fills of scratch windows and copies between
// windows. Deferring them lets steps combine: the GEMMs of consecutive steps that continue each
// other along k run as one product; a fill of zeros becomes a GEMM that starts from zero instead
// of reading C; a store of an accumulator whose GEMM starts from zero makes that GEMM write the
// store's window itself (the accumulator then holds a deferred copy of it); GEMMs writing
// neighbouring windows of the same operands merge into one product (a blocked matmul's output
// tiles, across the grid); and whatever is overwritten or dead before anything reads it never
// runs. A window's deferred writes run before anything else reads or writes it. Internal to the
// backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_DEFERRED_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_DEFERRED_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/x86/gemm.h"
#include "backends/x86/pallas_view.h"

namespace shardjit::backends::x86::pallas {

class DeferredWrites {
 public:
  // Refs from `first` on are scratch: private to the thread and dead once its steps end.
  void set_first_scratch(int first) { first_scratch_ = first; }

  // A GEMM into window `g.c` (f32, rows g.ldc apart) of `ref` whose A and B do not change while
  // the grid runs: joins a deferred one it continues along k, else is deferred itself (starting
  // from zero when a deferred fill of zeros is exactly its window).
  absl::Status AddGemm(int ref, GemmArgs g);
  // Window `w` of `ref` is about to be overwritten: what is deferred inside it is dropped and
  // what overlaps it runs. A fill of +0.0 f32 into a scratch ref is deferred (returns true);
  // otherwise the caller writes the window (returns false).
  absl::StatusOr<bool> Overwrite(int ref, const View& w, bool zero_f32);
  // Window `w` (of any ref) is read or written: what is deferred into its memory runs first.
  absl::Status Settle(const View& w);
  // Rows [lo, hi) of window `v` are read (a masked store's rows): only those rows of the GEMMs
  // deferred there run; the others stay deferred.
  absl::Status SettleRows(const View& v, int64_t lo, int64_t hi);
  // A store of window `src` of ref `from` into window `dst` of ref `to`: when `src` is exactly
  // the window of one deferred GEMM that starts from zero, that GEMM writes `dst` instead and
  // `src` becomes a deferred copy of it (true); false when it cannot (the caller settles both and
  // copies).
  absl::StatusOr<bool> MoveInto(int from, const View& src, int to, const View& dst);
  // The same for rows [lo, hi) of `src` (every column) stored into those rows of `dst` (a masked
  // store: megablox's group rows of a tile): those rows of the GEMM move, the others stay
  // deferred where they were.
  absl::StatusOr<bool> MoveRowsInto(int from, const View& src, int64_t lo, int64_t hi, int to,
                                    const View& dst);
  // Runs everything deferred.
  absl::Status SettleAll();
  // Drops what is deferred into scratch refs and runs the rest (the thread's steps are over).
  absl::Status SettleAtEnd();

  // Rows of deferred GEMMs dropped so far (overwritten or dead before anything read them), and
  // the products deferred GEMMs ran as.
  int64_t rows_skipped() const { return rows_skipped_; }
  int64_t gemms_run() const { return gemms_run_; }

 private:
  struct DeferredGemm {
    GemmArgs args;  // f32 C, ldc set
    int ref;
  };
  struct DeferredFill {  // +0.0 f32 in every element of `window`
    int ref;
    View window;
  };
  struct DeferredCopy {  // `window` holds what `from` holds (its GEMMs run first)
    int ref;
    View window, from;
  };

  bool Scratch(int ref) const { return first_scratch_ >= 0 && ref >= first_scratch_; }
  absl::Status RunGemm(size_t i);
  // Runs the deferred GEMMs (of any ref) whose C overlaps `w`.
  absl::Status RunGemmsOverlapping(const View& w);
  // Makes deferred copy `i`, its source settled first.
  absl::Status MakeCopy(size_t i);
  // Makes the deferred copies whose source overlaps `w` (before `w` changes).
  absl::Status CopiesFrom(const View& w);
  // Makes the copies and fills deferred into `w` (and the copies reading it).
  absl::Status SettleCopiesAndFills(const View& w);
  // Merges GEMM `i` with another deferred GEMM it extends along m or n, as long as it can.
  void Merge(size_t i);

  std::vector<DeferredGemm> gemms_;
  std::vector<DeferredFill> fills_;
  std::vector<DeferredCopy> copies_;
  int first_scratch_ = -1;
  int64_t rows_skipped_ = 0;
  int64_t gemms_run_ = 0;
};

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_DEFERRED_H_
