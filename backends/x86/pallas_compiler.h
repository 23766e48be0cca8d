// The compiler of a pallas_call kernel into the step programs of backends/x86/pallas_program.h,
// shared by the files that compile each family of kernel ops: pallas_compile.cc (regions, scalar
// code, loads and stores, other tile ops), pallas_compile_control.cc (cond, fori_loop,
// while_loop), pallas_compile_gemm.cc (tile dots as GEMM steps), pallas_compile_peers.cc (axis
// queries, semaphores and DMAs through the kernel's peers) and pallas_compile_masks.cc (selects
// read through their masks). Internal to the backend.
#ifndef SHARDJIT_BACKENDS_X86_PALLAS_COMPILER_H_
#define SHARDJIT_BACKENDS_X86_PALLAS_COMPILER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/reference/kernel.h"
#include "backends/x86/pallas_masks.h"
#include "backends/x86/pallas_program.h"
#include "ir/ir.pb.h"
#include "ir/shaped_type.h"

namespace shardjit::backends::x86::pallas {

// Where a value lives while a kernel runs.
enum class Kind {
  kScalar,  // an s32 or pred scalar in an integer slot
  kTile,    // a dense tensor
  kView,    // a window of a ref, read in place
};

struct Value {
  Kind kind = Kind::kTile;
  int slot = 0;
  ir::ShapedType type;
};

// Whether `t` is a scalar the kernel keeps in an integer slot (s32 or pred).
inline bool IsScalarType(const ir::ShapedType& t) {
  return t.rank() == 0 && (t.dtype == ir::DType::kS32 || t.dtype == ir::DType::kPred);
}

class Compiler {
 public:
  Compiler(const ir::Op& op, const reference::KernelOverrides& kernels)
      : op_(op),
        a_(op.pallas_call()),
        kernels_(kernels),
        symbols_([this](int64_t id) -> std::optional<ScalarTerm> {
          auto it = values_.find(id);
          if (it == values_.end() || it->second.kind != Kind::kScalar ||
              it->second.type.dtype != ir::DType::kS32) {
            return std::nullopt;
          }
          return ScalarTerm{it->second.slot};
        }) {}

  absl::StatusOr<std::unique_ptr<CompiledCall>> Compile();

 private:
  static absl::Status Unsupported(const std::string& why) {
    return absl::UnimplementedError("pallas_call: not compiled: " + why);
  }

  int NewScalar() { return scalars_++; }

  // The ref a dma_start writes (its dst), or -1.
  int DmaDst(const ir::Op& op) const;

  int64_t RefRank(int64_t id) const {
    return static_cast<int64_t>(ref_types_.at(ref_of_.at(id)).dims.size());
  }

  void CollectStores(const ir::Region& region);

  // Whether op (or a region inside it) reads or writes ref `ref` (an op that waits for peers
  // may see them write any ref).
  bool Touches(const ir::Op& op, int ref) const;

  bool Writes(const ir::Op& op, int ref) const;

  // Uses of each value in `region` (nested regions included) and the index of the last op of
  // `region` using it.
  struct Uses {
    std::unordered_map<int64_t, int> count;
    std::unordered_map<int64_t, int> last;
  };

  static void CountUses(const ir::Region& region, int index, Uses& uses);

  static Uses RegionUses(const ir::Region& region);

  absl::Status CompileRegion(const ir::Region& region, Program& out);

  // select(mask, value, otherwise) whose mask MaskSymbols knows: its uses that read it through
  // the mask (a dot operand, a store of a window's old contents outside the mask) skip the
  // select and the mask's own computation.
  struct MaskedSelect {
    Mask mask;
    int64_t value = 0, otherwise = 0;
    ir::DType narrow = ir::DType::kInvalid;  // MaskSymbols::Select::narrow
    bool zero_otherwise = false;
    const ir::Region* region = nullptr;
    int index = 0;
  };

  void RecordMaskedSelect(const ir::Op& op);

  // The op of the current region defining `id`, or null.
  const ir::Op* Producer(int64_t id) const;

  // Whether no op of the current region strictly between `from` and `to` writes `ref`.
  bool NoWritesBetween(int ref, int from, int to) const;

  // The masked select value `id` is, when op `at` of the current region may read it through its
  // mask (its value still unchanged there); null otherwise.
  const MaskedSelect* MaskedUse(int64_t id, int at) const;

  // Whether masked select `s` keeps the old contents of the window `store` writes outside its
  // mask (its otherwise is a load of that window, unchanged until the store).
  bool KeepsOldContents(const MaskedSelect& s, const ir::Op& store) const;

  // Drops the steps of masked selects all of whose uses read them through their masks, then of
  // the array ops only dropped steps used (scalars stay: masks read them).
  void DropUnneeded(const ir::Region& region, const Uses& uses,
                    const std::vector<std::pair<size_t, size_t>>& steps, Program& out);

  // A reader of value `v` as an s32/pred scalar.
  std::function<int64_t(const Frame&)> ScalarReader(int64_t id) const;

  // Operand `id` as a dense tensor.
  std::function<ir::Tensor(Frame&)> TensorReader(int64_t id) const;

  // Operand `id` as a view (tiles as dense views).
  std::function<View(Frame&)> ViewReader(int64_t id);

  // The window of ref_load / ref_store `op` (starts from operand `first` on) at run time, checked
  // against the ref. `flush`: settle the writes deferred into the window first (every access but
  // the ones that defer writes themselves; windows of refs the kernel never stores to or copies
  // into have none). `access`: what the access does to a block of a fresh output, for its
  // padding.
  std::function<absl::StatusOr<View>(Frame&)> WindowOf(const ir::Op& op, int first,
                                                       bool flush = true,
                                                       OutputAccess access = OutputAccess::kRead);

  // The window of the ref operand `r` whose `rank` starts are the operands from `first` on.
  std::function<absl::StatusOr<View>(Frame&)> WindowOf(
      const ir::Op& op, int r, int first, int rank,
      const google::protobuf::RepeatedField<int64_t>& window_sizes,
      const google::protobuf::RepeatedField<int64_t>& window_squeezed, bool flush = true,
      OutputAccess access = OutputAccess::kRead);

  void Define(int64_t id, Kind kind, const ir::ShapedType& type) {
    const int slot = kind == Kind::kScalar ? scalars_++ : kind == Kind::kTile ? tiles_++ : views_++;
    values_[id] = {kind, slot, type};
  }

  // `ops[i]` = add(load R, dot) whose sum is stored back to the same window of R: the index of
  // the load, the dot and the store, when the GEMM can accumulate into R in place.
  struct Accumulation {
    int load = -1, dot = -1, store = -1;
  };

  std::optional<Accumulation> MatchAccumulation(const ir::Region& region, int add,
                                                const Uses& uses) const;

  // Whether dot_general `dot` runs as a GEMM (GemmStep): 2-D f32 or bf16 operands of one
  // dtype, one contracting dimension, no batch dimensions, an f32 or bf16 result.
  bool RunsAsGemm(const ir::Op& dot) const;
  // A GEMM step for dot_general `op` writing C through `out`; with `accumulate_ref` >= 0,
  // accumulating into that ref's window (and deferred while later steps continue it).
  // `at`: the index of the dot in the current region. An operand that is a masked select of
  // zeros (MaskedUse) is read through its mask: when both operands' masks constrain only the
  // contracting dimension, to the same range, the GEMM runs over that depth; otherwise over a
  // zero-filled copy of the mask's elements.
  absl::StatusOr<Step> GemmStep(const ir::Op& op, std::function<absl::StatusOr<View>(Frame&)> out,
                                int accumulate_ref, int at);

  absl::Status CompileOp(const ir::Region& region, int i, const Uses& uses,
                         std::unordered_set<int>& skipped, Program& out);

  // A step computing scalar `op` = fn(its N scalar operands).
  template <int N, typename Fn>
  absl::Status ScalarStep(const ir::Op& op, Fn fn, Program& out);

  absl::Status Load(const ir::Region& region, int i, const Uses& uses, Program& out);

  absl::Status Store(const ir::Op& op, const Uses& uses, Program& out);
  int ReadAtStore(int64_t value, const ir::Op& store, const Uses& uses, Program& out,
                  OutputAccess access = OutputAccess::kRead);

  // pallas_compile_control.cc: cond (the chosen branch's program on its operands), fori_loop
  // (static bounds) and while_loop, their params, carries and results in slots of their own.
  absl::Status Cond(const ir::Op& op, Program& out);
  absl::Status ForiLoop(const ir::Op& op, Program& out);
  absl::Status WhileLoop(const ir::Op& op, Program& out);
  // Defines the values `ids` of `types` in slots of their own: s32/pred scalars in integer slots,
  // arrays as tiles; Unsupported for refs and futures (`what` names the op).
  absl::StatusOr<std::vector<Value>> DefineSlots(const std::vector<int64_t>& ids,
                                                 const std::vector<ir::ShapedType>& types,
                                                 const std::string& what);
  // A step part that copies the values `sources` into `targets` (all read before any is written:
  // one may be read for another's slot).
  std::function<void(Frame&)> CopyInto(const std::vector<Value>& targets,
                                       const google::protobuf::RepeatedField<int64_t>& sources);

  // axis_index / axis_size: where the device running the kernel sits in the run's mesh.
  absl::Status AxisQuery(const ir::Op& op, Program& out);

  // The semaphore operand at `k` and its indices: a reader of its slot (an error outside the
  // array) and of its name, and the operand after the indices.
  struct SemaphoreReader {
    std::function<absl::StatusOr<SemaphoreSlot>(const Frame&)> slot;
    std::string name;
    std::vector<int64_t> dims;  // of the semaphore array
    int next = 0;

    // "scratch ref 2[1,0]": how errors name semaphore `flat` of the array (as the interpreter).
    std::string Name(int64_t flat) const;
  };

  SemaphoreReader SemaphoreAt(const ir::Op& op, int k) const;

  // The device the operands from `k` on name (this one when there are none).
  std::function<absl::StatusOr<int64_t>(const Frame&)> TargetAt(
      const ir::Op& op, int k, const google::protobuf::RepeatedPtrField<std::string>& axes,
      bool logical) const;

  // semaphore_signal / semaphore_wait / semaphore_read / dma_wait through the kernel's peers.
  absl::Status SemaphoreStep(const ir::Op& op, Program& out);

  // dma_start: the src window copied into the dst window here or on the target device, counted
  // on the semaphores.
  absl::Status DmaStart(const ir::Op& op, Program& out);

  // Any other local op: dense operands through the backend's kernel (the reference one where
  // it declines). An op of no operands (a constant, an iota) is computed once, here.
  absl::Status Generic(const ir::Op& op, Program& out);

  const ir::Op& op_;

  const ir::PallasCallAttrs& a_;

  const reference::KernelOverrides& kernels_;

  std::unordered_map<int64_t, Value> values_;

  std::unordered_map<int64_t, int> ref_of_;

  std::vector<ir::ShapedType> ref_types_;  // per kernel param
  std::unordered_set<int> stored_refs_;

  std::unordered_map<int64_t, size_t> dot_step_;

  std::unordered_map<int64_t, size_t> load_step_;

  // The ref each in-place loaded value reads.
  std::unordered_map<int64_t, int> view_ref_;

  int scalars_ = 0, tiles_ = 0, views_ = 0;

  int masked_selects_ = 0;

  // The region being compiled and the index of its op being compiled.
  const ir::Region* region_ = nullptr;

  int index_ = 0;

  // The region and index of the op defining each value.
  std::unordered_map<int64_t, std::pair<const ir::Region*, int>> producer_;

  std::unordered_map<int64_t, MaskedSelect> masked_;

  // The (op, operand) pairs reading each masked select through its mask.
  std::unordered_map<int64_t, std::set<std::pair<const ir::Op*, int>>> symbolic_uses_;

  MaskSymbols symbols_;
};

}  // namespace shardjit::backends::x86::pallas

#endif  // SHARDJIT_BACKENDS_X86_PALLAS_COMPILER_H_
