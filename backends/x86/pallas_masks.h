// Masks a compiled kernel builds from iotas and scalars (backends/x86/pallas_compiler.h): a pred
// tile that holds where every condition `iota_d + offsets <direction> bound` holds, each on one
// dimension. Knowing a mask symbolically lets the compiler run `select(mask, block, 0)` feeding a
// dot as a GEMM over the mask's depth, and a store of `select(mask, v, old contents)` as a copy
// of the mask's box, instead of computing the mask and the select element by element.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_MASKS_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_MASKS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backends/x86/pallas_program.h"
#include "ir/ir.pb.h"

namespace shardjit::backends::x86::pallas {

// An s32 scalar of a running kernel: a slot of Frame::scalars, or a constant (slot < 0).
struct ScalarTerm {
  int slot = -1;
  int64_t constant = 0;
  int64_t Eval(const Frame& f) const { return slot >= 0 ? f.scalars[slot] : constant; }
};

// `wrap32(wrap32(i + offsets[0]) + ...) <direction> bound` of index i along `dim` (operands
// swapped when !index_on_left), as the s32 elementwise ops compute it.
struct IndexCondition {
  int dim = 0;
  std::vector<ScalarTerm> offsets;
  ir::ComparisonDirection direction = ir::EQ;
  ScalarTerm bound;
  bool index_on_left = true;
};
using Mask = std::vector<IndexCondition>;  // every condition holds

// Dims the conditions of `mask` constrain.
std::vector<int> MaskedDims(const Mask& mask);

// A mask evaluated for a tile of `dims`: per dimension the indices where its conditions hold,
// [lo, hi) when they are contiguous (empty: lo == hi); otherwise `truth` lists them.
struct MaskBox {
  Dims lo, hi;
  bool intervals = true;
  std::vector<std::vector<bool>> truth;  // per dim, when !intervals
};
MaskBox EvalMask(const Mask& mask, const Dims& dims, const Frame& f);

// The box [lo, hi) of view `v`.
View SubView(const View& v, const Dims& lo, const Dims& hi);

// Copies the elements of `src` where `box` holds into `dst` (same dims; an f32 `src` into a bf16
// `dst` rounds to nearest even); the others of `dst` stay as they are.
void CopyWhere(const View& dst, const View& src, const MaskBox& box);

// `src` where `box` holds, zeros elsewhere, in `storage` (allocated here).
View MaskedCopy(const View& src, const MaskBox& box, ir::Tensor& storage, ir::Allocator* allocator);

// Symbols of a kernel region's values, recorded op by op as the compiler meets them.
class MaskSymbols {
 public:
  // `scalar(id)`: the term of value `id` when it is an s32 scalar of the kernel.
  explicit MaskSymbols(std::function<std::optional<ScalarTerm>(int64_t)> scalar)
      : scalar_(std::move(scalar)) {}

  // Records the symbol of op's result, where it has one.
  void Analyze(const ir::Op& op);
  // The mask value `id` is, if it is one.
  const Mask* MaskOf(int64_t id) const;

  // `op` as select(mask, value, otherwise) of a known mask: a select, or a fusion whose result
  // is a select of two of its operands, or (megablox's store of an f32 accumulator into a bf16
  // output) a fusion whose result is convert(select(mask, value, convert(otherwise)), bf16) of an
  // f32 value and a bf16 otherwise (which the two converts give back exactly): `narrow` bf16.
  struct Select {
    Mask mask;
    int64_t value = 0, otherwise = 0;  // operand ids of `op`
    ir::DType narrow = ir::DType::kInvalid;
  };
  std::optional<Select> SelectOf(const ir::Op& op) const;

 private:
  struct Symbol {
    enum class Kind { kScalar, kSplat, kIota, kMask } kind = Kind::kScalar;
    ScalarTerm value;                 // kScalar, kSplat: the value of every element
    int dim = 0;                      // kIota: the index along dim plus offsets
    std::vector<ScalarTerm> offsets;
    Mask mask;                        // kMask
  };
  using Lookup = std::function<std::optional<Symbol>(int64_t)>;
  static std::optional<Symbol> Of(const ir::Op& op, const Lookup& operand);
  // The symbols of the values of fusion `op`'s body, its params those of its operands.
  static std::unordered_map<int64_t, Symbol> BodySymbols(const ir::Op& op, const Lookup& operand);
  Lookup Outer() const;

  std::function<std::optional<ScalarTerm>(int64_t)> scalar_;
  std::unordered_map<int64_t, Symbol> symbols_;
};

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_MASKS_H_
