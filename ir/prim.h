// Which primitive an op is, as an enum: the one way code dispatches on an op's kind (besides the
// `attrs` oneof, where that alone identifies the primitive: has_fori_loop(), has_all_gather()).
// Opcode text is for the text form, error messages and the registry; code asks PrimOf(op).
//
// Every primitive registered in ir/prims/*.cc has exactly one value here and every value but
// kUnknown names a registered primitive (ir/prim_test.cc walks the registry); the registry keeps
// each primitive's Prim (Primitive::prim, FindPrimitive(Prim) in ir/primitive.h).
#ifndef SHARDJIT_IR_PRIM_H_
#define SHARDJIT_IR_PRIM_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace shardjit::ir {

class Op;

// X(enumerator, opcode text), one per blocking primitive.
#define SHARDJIT_IR_PRIMS(X)                               \
  /* elementwise (ir/prims/elementwise.cc) */              \
  X(kAdd, "add")                                           \
  X(kSub, "sub")                                           \
  X(kMul, "mul")                                           \
  X(kDiv, "div")                                           \
  X(kRem, "rem")                                           \
  X(kMax, "max")                                           \
  X(kMin, "min")                                           \
  X(kNeg, "neg")                                           \
  X(kAbs, "abs")                                           \
  X(kExp, "exp")                                           \
  X(kLog, "log")                                           \
  X(kTanh, "tanh")                                         \
  X(kSqrt, "sqrt")                                         \
  X(kRsqrt, "rsqrt")                                       \
  X(kLogistic, "logistic")                                 \
  X(kCompare, "compare")                                   \
  X(kSelect, "select")                                     \
  X(kClamp, "clamp")                                       \
  X(kConvertElementType, "convert_element_type")           \
  X(kBitcastConvertType, "bitcast_convert_type")           \
  /* math (ir/prims/math.cc) */                            \
  X(kSin, "sin")                                           \
  X(kCos, "cos")                                           \
  X(kTan, "tan")                                           \
  X(kErf, "erf")                                           \
  X(kErfInv, "erf_inv")                                    \
  X(kLog1p, "log1p")                                       \
  X(kExpm1, "expm1")                                       \
  X(kFloor, "floor")                                       \
  X(kCeil, "ceil")                                         \
  X(kRound, "round")                                       \
  X(kSign, "sign")                                         \
  X(kIsFinite, "is_finite")                                \
  X(kIntegerPow, "integer_pow")                            \
  X(kPow, "pow")                                           \
  X(kAtan2, "atan2")                                       \
  X(kNextafter, "nextafter")                               \
  X(kAnd, "and")                                           \
  X(kOr, "or")                                             \
  X(kXor, "xor")                                           \
  X(kNot, "not")                                           \
  X(kShiftLeft, "shift_left")                              \
  X(kShiftRightLogical, "shift_right_logical")             \
  X(kShiftRightArithmetic, "shift_right_arithmetic")       \
  X(kPopulationCount, "population_count")                  \
  /* compute (ir/prims/compute.cc, grouped_matmul.cc) */   \
  X(kConstant, "constant")                                 \
  X(kIota, "iota")                                         \
  X(kReduceSum, "reduce_sum")                              \
  X(kReduceMax, "reduce_max")                              \
  X(kReduceMin, "reduce_min")                              \
  X(kReduceProd, "reduce_prod")                            \
  X(kReduceAnd, "reduce_and")                              \
  X(kReduceOr, "reduce_or")                                \
  X(kDotGeneral, "dot_general")                            \
  X(kDotAccumulate, "dot_accumulate")                      \
  X(kGmm, "gmm")                                           \
  X(kTgmm, "tgmm")                                         \
  /* data movement (ir/prims/shape_ops.cc, sharding.cc) */ \
  X(kBroadcastInDim, "broadcast_in_dim")                   \
  X(kReshape, "reshape")                                   \
  X(kTranspose, "transpose")                               \
  X(kSlice, "slice")                                       \
  X(kDynamicSlice, "dynamic_slice")                        \
  X(kDynamicUpdateSlice, "dynamic_update_slice")           \
  X(kConcatenate, "concatenate")                           \
  X(kPad, "pad")                                           \
  X(kRev, "rev")                                           \
  /* indexing (ir/prims/indexing.cc) */                    \
  X(kGather, "gather")                                     \
  X(kScatter, "scatter")                                   \
  X(kScatterAdd, "scatter_add")                            \
  X(kScatterMul, "scatter_mul")                            \
  X(kScatterMin, "scatter_min")                            \
  X(kScatterMax, "scatter_max")                            \
  X(kWithShardingConstraint, "with_sharding_constraint")   \
  /* random bits (ir/prims/random.cc) */                   \
  X(kThreefry2x32, "threefry2x32")                         \
  /* ordering and scans (ir/prims/sorting.cc) */          \
  X(kSort, "sort")                                         \
  X(kTopK, "top_k")                                        \
  X(kArgmax, "argmax")                                     \
  X(kArgmin, "argmin")                                     \
  X(kCumsum, "cumsum")                                     \
  X(kCumprod, "cumprod")                                   \
  X(kCummax, "cummax")                                     \
  X(kCummin, "cummin")                                     \
  /* regions (ir/prims/fusion.cc, control_flow.cc, custom_derivatives.cc) */ \
  X(kFusion, "fusion")                                     \
  X(kForiLoop, "fori_loop")                                \
  X(kWhileLoop, "while_loop")                              \
  X(kCond, "cond")                                         \
  X(kShardMap, "shard_map")                                \
  X(kCustomJvpCall, "custom_jvp_call")                     \
  X(kCustomVjpCall, "custom_vjp_call")                     \
  X(kCheckpoint, "checkpoint")                             \
  X(kOptimizationBarrier, "optimization_barrier")          \
  X(kName, "name")                                         \
  /* user kernels (ir/prims/pallas.cc) */                  \
  X(kPallasCall, "pallas_call")                            \
  X(kRefLoad, "ref_load")                                  \
  X(kRefStore, "ref_store")                                \
  X(kProgramId, "program_id")                              \
  X(kNumPrograms, "num_programs")                          \
  X(kSemaphoreSignal, "semaphore_signal")                  \
  X(kSemaphoreWait, "semaphore_wait")                      \
  X(kSemaphoreRead, "semaphore_read")                      \
  X(kDmaStart, "dma_start")                                \
  X(kDmaWait, "dma_wait")                                  \
  /* collectives (ir/prims/collectives.cc) */              \
  X(kPsum, "psum")                                         \
  X(kPmean, "pmean")                                       \
  X(kPmax, "pmax")                                         \
  X(kPmin, "pmin")                                         \
  X(kAllGather, "all_gather")                              \
  X(kPsumScatter, "psum_scatter")                          \
  X(kPpermute, "ppermute")                                 \
  X(kPsend, "psend")                                       \
  X(kPrecv, "precv")                                       \
  X(kAllToAll, "all_to_all")                               \
  X(kPbroadcast, "pbroadcast")                             \
  X(kRaggedAllToAll, "ragged_all_to_all")                  \
  X(kAxisIndex, "axis_index")                              \
  X(kAxisSize, "axis_size")                                \
  X(kPvary, "pvary")

// X(enumerator, opcode text) of the blocking collectives with an asynchronous form
// (ir/async.h); each gives two more values, <enumerator>Start ("<text>_start") and
// <enumerator>Done ("<text>_done").
#define SHARDJIT_IR_ASYNC_PRIMS(X) \
  X(kAllGather, "all_gather")      \
  X(kPsum, "psum")                 \
  X(kPsumScatter, "psum_scatter")  \
  X(kAllToAll, "all_to_all")       \
  X(kPpermute, "ppermute")         \
  X(kPbroadcast, "pbroadcast")

// clang-format off
enum class Prim : uint8_t {
  kUnknown = 0,  // no registered primitive has this opcode
#define SHARDJIT_IR_PRIM_ENUM(e, text) e,
  SHARDJIT_IR_PRIMS(SHARDJIT_IR_PRIM_ENUM)
#undef SHARDJIT_IR_PRIM_ENUM
#define SHARDJIT_IR_PRIM_ENUM(e, text) e##Start, e##Done,
  SHARDJIT_IR_ASYNC_PRIMS(SHARDJIT_IR_PRIM_ENUM)
#undef SHARDJIT_IR_PRIM_ENUM
};
// clang-format on

namespace prim_internal {

#define SHARDJIT_IR_PRIM_COUNT(e, text) +1
inline constexpr int kBlockingCount = 0 SHARDJIT_IR_PRIMS(SHARDJIT_IR_PRIM_COUNT);
inline constexpr int kAsyncCount = 0 SHARDJIT_IR_ASYNC_PRIMS(SHARDJIT_IR_PRIM_COUNT);
#undef SHARDJIT_IR_PRIM_COUNT
// The first *_start; the async values come in (start, done) pairs from here on.
inline constexpr int kFirstAsync = 1 + kBlockingCount;

}  // namespace prim_internal

// Values of Prim, kUnknown included: Prim(0) .. Prim(kPrimCount - 1).
inline constexpr int kPrimCount = prim_internal::kFirstAsync + 2 * prim_internal::kAsyncCount;

// The blocking collectives with an asynchronous form, in SHARDJIT_IR_ASYNC_PRIMS order.
inline constexpr Prim kAsyncCollectives[] = {
#define SHARDJIT_IR_PRIM_ENUM(e, text) Prim::e,
    SHARDJIT_IR_ASYNC_PRIMS(SHARDJIT_IR_PRIM_ENUM)
#undef SHARDJIT_IR_PRIM_ENUM
};
// clang-format on

namespace prim_internal {

// clang-format off
inline constexpr std::string_view kNames[kPrimCount] = {
    "",
#define SHARDJIT_IR_PRIM_NAME(e, text) text,
    SHARDJIT_IR_PRIMS(SHARDJIT_IR_PRIM_NAME)
#undef SHARDJIT_IR_PRIM_NAME
#define SHARDJIT_IR_PRIM_NAME(e, text) text "_start", text "_done",
    SHARDJIT_IR_ASYNC_PRIMS(SHARDJIT_IR_PRIM_NAME)
#undef SHARDJIT_IR_PRIM_NAME
};
// clang-format on

}  // namespace prim_internal

// The opcode text of `p`; empty for kUnknown.
constexpr std::string_view PrimName(Prim p) {
  const int i = static_cast<int>(p);
  return i < kPrimCount ? prim_internal::kNames[i] : std::string_view();
}

// The Prim whose opcode text is `opcode`; kUnknown when none is. O(1), allocation-free: a
// precomputed open-addressing table keyed by the length and four characters, confirmed by one
// comparison with the candidate's text.
Prim PrimFromName(std::string_view opcode);
// PrimFromName(op.opcode()).
Prim PrimOf(const Op& op);

// *_start / *_done of an asynchronous collective (ir/async.h).
constexpr bool IsAsyncStart(Prim p) {
  const int i = static_cast<int>(p) - prim_internal::kFirstAsync;
  return i >= 0 && i < 2 * prim_internal::kAsyncCount && i % 2 == 0;
}
constexpr bool IsAsyncDone(Prim p) {
  const int i = static_cast<int>(p) - prim_internal::kFirstAsync;
  return i >= 0 && i < 2 * prim_internal::kAsyncCount && i % 2 == 1;
}
// For ppermute_start or ppermute_done: kPpermute; kUnknown for any other.
constexpr Prim AsyncBlocking(Prim p) {
  const int i = static_cast<int>(p) - prim_internal::kFirstAsync;
  return i >= 0 && i < 2 * prim_internal::kAsyncCount ? kAsyncCollectives[i / 2] : Prim::kUnknown;
}
// The collective `p` performs: its blocking twin for a start or done, else `p` itself.
constexpr Prim CollectiveKind(Prim p) {
  const Prim blocking = AsyncBlocking(p);
  return blocking == Prim::kUnknown ? p : blocking;
}
// kPpermute -> kPpermuteStart / kPpermuteDone; kUnknown where `blocking` has no async form.
constexpr Prim AsyncStartOf(Prim blocking) {
  for (int i = 0; i < prim_internal::kAsyncCount; ++i) {
    if (kAsyncCollectives[i] == blocking) {
      return static_cast<Prim>(prim_internal::kFirstAsync + 2 * i);
    }
  }
  return Prim::kUnknown;
}
constexpr Prim AsyncDoneOf(Prim blocking) {
  const Prim start = AsyncStartOf(blocking);
  return start == Prim::kUnknown ? start : static_cast<Prim>(static_cast<int>(start) + 1);
}

// psend / precv: point-to-point halves of a ppermute (ir/async.h).
// Kernel ops that take refs (read or write buffers or semaphores): their order matters.
constexpr bool IsRefOp(Prim p) {
  return p == Prim::kRefLoad || p == Prim::kRefStore || p == Prim::kSemaphoreSignal ||
         p == Prim::kSemaphoreWait || p == Prim::kSemaphoreRead || p == Prim::kDmaStart ||
         p == Prim::kDmaWait;
}
// Those that change a ref or a semaphore (here or on another device).
constexpr bool WritesRefs(Prim p) {
  return IsRefOp(p) && p != Prim::kRefLoad && p != Prim::kSemaphoreRead;
}
// Kernel ops that talk to semaphores (a kernel using one meets its peers' instances).
constexpr bool IsSemaphoreOp(Prim p) {
  return p == Prim::kSemaphoreSignal || p == Prim::kSemaphoreWait ||
         p == Prim::kSemaphoreRead || p == Prim::kDmaStart || p == Prim::kDmaWait;
}

constexpr bool IsPointToPoint(Prim p) { return p == Prim::kPsend || p == Prim::kPrecv; }

// psum, pmean, pmax, pmin (blocking; apply CollectiveKind first for an async form).
constexpr bool IsAllReduce(Prim p) {
  return p == Prim::kPsum || p == Prim::kPmean || p == Prim::kPmax || p == Prim::kPmin;
}

// How a reduction combines elements.
enum class ReduceOp : uint8_t { kSum, kMax, kMin };

// The combining step of reduce_sum/max/min, psum/pmax/pmin, pmean (a sum, then divided by the
// group size) and psum_scatter (blocking; apply CollectiveKind first for an async form); none for
// any other primitive.
constexpr std::optional<ReduceOp> ReductionOf(Prim p) {
  switch (p) {
    case Prim::kReduceSum:
    case Prim::kPsum:
    case Prim::kPmean:
    case Prim::kPsumScatter:
      return ReduceOp::kSum;
    case Prim::kReduceMax:
    case Prim::kPmax:
      return ReduceOp::kMax;
    case Prim::kReduceMin:
    case Prim::kPmin:
      return ReduceOp::kMin;
    default:
      return std::nullopt;
  }
}

// The all-reduce that combines with `op`: psum, pmax or pmin.
constexpr Prim AllReduceOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return Prim::kPsum;
    case ReduceOp::kMax:
      return Prim::kPmax;
    case ReduceOp::kMin:
      return Prim::kPmin;
  }
  return Prim::kPsum;
}

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_PRIM_H_
