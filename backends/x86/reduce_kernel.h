// The two inner loops of reduce_sum/max/min over f32 or bf16 input with f32 accumulators: AVX2 code
// generated with xbyak, and the same loops in plain C++ for ISAs below AVX2. bf16 loads widen
// exactly to f32. max/min propagate NaN and keep the accumulator on ties, like the reference; see
// reduce.h for where the vector order differs from the reference's.
#ifndef SHARDJIT_BACKENDS_X86_REDUCE_KERNEL_H_
#define SHARDJIT_BACKENDS_X86_REDUCE_KERNEL_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "backends/reduce_kind.h"
#include "backends/x86/cpu_features.h"
#include "backends/x86/jit_generator.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {

// kRows:    acc[r] = acc[r] <op> (elements [0, 8 * vectors) of row r), each row reduced in 4
//           vector accumulators whose lanes are combined at the end.
// kColumns: acc[j] = acc[j] <op> row[j] for each row in order, j < 8 * vectors.
enum class ReduceLayout { kRows, kColumns };

// Arguments of one call; field offsets are read by generated code (offsetof).
struct ReduceArgs {
  const void* src = nullptr;  // row 0 (f32 or bf16 elements)
  int64_t row_stride = 0;     // bytes between rows
  int64_t rows = 0;           // >= 1
  int64_t vectors = 0;        // >= 1 blocks of 8 elements per row
  float* acc = nullptr;       // kRows: one per row; kColumns: 8 * vectors
};

using ReduceLoopFn = void (*)(const ReduceArgs*);

struct ReduceLoopKey {
  ReduceKind kind = ReduceKind::kSum;
  ir::DType dtype = ir::DType::kF32;  // of the input: kF32 or kBF16
  ReduceLayout layout = ReduceLayout::kRows;
  // "reduce_avx2_max_bf16_columns".
  std::string Name() const;
};

// AVX2 generator of one loop; 8-lane ymm vectors.
class ReduceKernelAvx2 final : public JitGenerator {
 public:
  explicit ReduceKernelAvx2(const ReduceLoopKey& key);

 private:
  static constexpr int kAccumulators = 4;  // kRows: independent vector accumulators

  void GenerateBody() override;
  void EmitRows();
  void EmitColumns();
  // acc[j] = acc[j] <op> row[j] for j < n over the rows held in `rows`, in order: loads and stores
  // each accumulator vector once. Clobbers reg_j.
  void EmitColumnLoop(std::initializer_list<Xbyak::Reg64> rows);
  // dst = 8 elements at `addr`, widened to f32.
  void EmitLoad(const Xbyak::Ymm& dst, const Xbyak::Address& addr);
  // acc = acc <op> x lane-wise, V being Xbyak::Ymm or Xbyak::Xmm. Clobbers tmp0_ and tmp1_.
  template <typename V>
  void EmitCombine(const V& acc, const V& x);
  int ElementBytes() const { return key_.dtype == ir::DType::kBF16 ? 2 : 4; }

  const ReduceLoopKey key_;

  // Registers, named once.
  const Xbyak::Reg64 reg_args = abi_param1;
  const Xbyak::Reg64 reg_src = rsi;     // current row
  const Xbyak::Reg64 reg_stride = rdx;  // bytes between rows
  const Xbyak::Reg64 reg_rows = rcx;    // rows left
  const Xbyak::Reg64 reg_n = r8;        // elements per row (8 * vectors)
  const Xbyak::Reg64 reg_acc = r9;
  const Xbyak::Reg64 reg_j = r10;  // element index within the row
  const Xbyak::Reg64 reg_row1 = r11, reg_row2 = r12,
                     reg_row3 = r13;    // kColumns: rows 1-3
  const Xbyak::Ymm x_ = Xbyak::Ymm(8);  // loaded elements
  const Xbyak::Ymm tmp0_ = Xbyak::Ymm(9);
  const Xbyak::Ymm tmp1_ = Xbyak::Ymm(10);
  const Xbyak::Ymm identity_vec_ = Xbyak::Ymm(11);
};

// The loop for `key` at `isa`: generated code (cached for the process) from AVX2 up, the plain C++
// loop below it. Internal when code generation fails.
absl::StatusOr<ReduceLoopFn> GetReduceLoop(const ReduceLoopKey& key, IsaLevel isa);

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_REDUCE_KERNEL_H_
