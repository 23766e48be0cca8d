// Kernels written by users, in the style of jax.experimental.pallas: pallas_call runs a kernel
// over a grid; BlockSpecs say which block of each operand and result the kernel sees at each
// grid step; inside the kernel, Refs are read and written with load/store, program_id gives the
// step, and jax.lax ops (dot_general, elementwise, fori_loop, cond) compute on loaded values.
//
//   auto matmul = pl::pallas_call(
//       [](pl::Ref x, pl::Ref y, pl::Ref o, pl::Ref acc) {
//         pl::when(pl::program_id(2) < 1,
//                  [&] { acc.store(lax::full({128, 128}, 0, DType::kF32)); });
//         acc.store(acc.load() + pl::dot(x.load(), y.load(), DType::kF32));
//         pl::when(pl::program_id(2) >= pl::num_programs(2) - 1, [&] { o.store(acc.load()); });
//       },
//       {.out_shapes = {{DType::kF32, {m, n}}},
//        .grid = {m / 128, n / 128, k / 128},
//        .in_specs = {pl::BlockSpec({128, 128}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; }),
//                     pl::BlockSpec({128, 128}, [](pl::Idx g) { return pl::Blocks{g[2], g[1]}; })},
//        .out_specs = {pl::BlockSpec({128, 128},
//                                    [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
//        .scratch_shapes = {{DType::kF32, {128, 128}}},
//        .dimension_semantics = {pl::kParallel, pl::kParallel, pl::kArbitrary}});
//   Tracer out = matmul(x, y)[0];
//
// Kernels on different devices (inside shard_map) talk as Pallas' TPU kernels do: scratch
// semaphores, make_async_copy / make_async_remote_copy with start() and wait(), semaphore_signal
// to a DeviceId, semaphore_wait, and lax::axis_index for where the kernel runs. A copy or signal
// to a device waits until that device has entered its instance of the call.
//
// Semantics are Pallas': blocks overhanging an array's end read as padding (NaN for floats, the
// minimum for integers, false for pred) and their writes outside the array are dropped; fresh
// outputs and scratch hold padding values; an output block visited by consecutive steps keeps
// what they wrote. Out-of-range block indices and windows that leave a ref fail the run with
// the kernel's name and the grid index.
#ifndef SHARDJIT_FRONTEND_PALLAS_H_
#define SHARDJIT_FRONTEND_PALLAS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/ops.h"
#include "frontend/traced_function.h"

namespace shardjit::pl {

// A mutable buffer inside a kernel: a block of an operand or result, a scalar-prefetch array or
// a scratch buffer (jax's Ref).
class Ref;

// One dimension of a ref index: an integer or traced scalar (the dimension is dropped from the
// value), ds(start, size) (a window), or all() (the whole dimension).
class Indexer {
 public:
  Indexer(Tracer index) : start_(std::move(index)), size_(1), squeeze_(true) {}
  Indexer(int index) : start_(index), size_(1), squeeze_(true) {}
  Indexer(int64_t index) : start_(index), size_(1), squeeze_(true) {}

  // ds(start, size): `size` elements from `start`.
  static Indexer Window(Index start, int64_t size) { return Indexer(std::move(start), size); }
  // The whole dimension.
  static Indexer All() { return Indexer(Index(0), -1); }

  const Index& start() const { return start_; }
  int64_t size() const { return size_; }  // -1: the whole dimension
  bool squeeze() const { return squeeze_; }

 private:
  Indexer(Index start, int64_t size) : start_(std::move(start)), size_(size), squeeze_(false) {}
  Index start_;
  int64_t size_;
  bool squeeze_;
};

// pl.ds(start, size) and a whole dimension (Python's `:`).
inline Indexer ds(Index start, int64_t size) { return Indexer::Window(std::move(start), size); }
inline Indexer all() { return Indexer::All(); }

class Ref {
 public:
  Ref() = default;
  explicit Ref(Tracer value) : value_(std::move(value)) {}

  // The array the ref holds.
  ShapedType type() const { return value_.type().Array(); }
  DType dtype() const { return value_.dtype(); }
  const std::vector<int64_t>& shape() const { return value_.shape(); }
  int64_t rank() const { return value_.rank(); }
  bool valid() const { return value_.valid(); }
  // The traced ref value itself.
  const Tracer& tracer() const { return value_; }

  // ref[...]: the whole ref.
  Tracer load(Loc loc = Loc::current()) const { return load({}, loc); }
  // ref[idx]: one Indexer per leading dimension (dimensions not indexed are whole).
  Tracer load(const std::vector<Indexer>& idx, Loc loc = Loc::current()) const;
  // ref[...] = value, ref[idx] = value (value of the indexed window's shape).
  void store(Tracer value, Loc loc = Loc::current()) const { store({}, std::move(value), loc); }
  void store(const std::vector<Indexer>& idx, Tracer value, Loc loc = Loc::current()) const;

  // ref.at[idx]: a window of the ref, for copies and for picking one semaphore of an array.
  class View at(std::vector<Indexer> idx) const;

 private:
  Tracer value_;
};

// A window of a ref (Ref::at; a Ref converts to its whole): what async copies read and write, and
// one semaphore of a semaphore array.
class View {
 public:
  View(Ref ref) : ref_(std::move(ref)) {}
  View(Ref ref, std::vector<Indexer> idx) : ref_(std::move(ref)), idx_(std::move(idx)) {}
  const Ref& ref() const { return ref_; }
  const std::vector<Indexer>& idx() const { return idx_; }

 private:
  Ref ref_;
  std::vector<Indexer> idx_;
};

inline View Ref::at(std::vector<Indexer> idx) const { return View(*this, std::move(idx)); }

// The grid indices an index map receives, and the block indices it returns (traced scalars or
// constants).
using Idx = const std::vector<Tracer>&;
using Blocks = std::vector<Index>;
// (grid indices, scalar-prefetch refs) -> one block index per array dimension.
using IndexMap = std::function<Blocks(const std::vector<Tracer>& grid,
                                      const std::vector<Ref>& prefetch)>;

// A block dimension that is squeezed away (Pallas' None): one element, absent from the ref.
inline constexpr int64_t kSqueezed = 0;

// Pallas' BlockSpec(block_shape, index_map). The index map takes the grid indices and, with
// scalar prefetch, the prefetch refs: [](pl::Idx g) {...} or [](pl::Idx g, const
// std::vector<pl::Ref>& prefetch) {...}. Any() is memory_space=ANY: the kernel gets the whole
// array (for kernels that copy by hand).
class BlockSpec {
 public:
  BlockSpec() = default;
  template <typename F>
  BlockSpec(std::vector<int64_t> block_shape, F index_map) : block_shape_(std::move(block_shape)) {
    if constexpr (std::is_invocable_v<F, const std::vector<Tracer>&,
                                      const std::vector<Ref>&>) {
      index_map_ = std::move(index_map);
    } else {
      index_map_ = [f = std::move(index_map)](const std::vector<Tracer>& grid,
                                               const std::vector<Ref>&) { return f(grid); };
    }
  }
  static BlockSpec Any() {
    BlockSpec s;
    s.whole_ = true;
    return s;
  }

  const std::vector<int64_t>& block_shape() const { return block_shape_; }
  const IndexMap& index_map() const { return index_map_; }
  bool whole() const { return whole_; }
  // Not set (a default BlockSpec): pallas_call uses the whole array as one block.
  bool unset() const { return !whole_ && !index_map_; }

 private:
  std::vector<int64_t> block_shape_;
  IndexMap index_map_;
  bool whole_ = false;
};

// dimension_semantics: parallel grid axes may run concurrently; arbitrary ones run in order.
enum class GridSemantics { kArbitrary, kParallel };
inline constexpr GridSemantics kParallel = GridSemantics::kParallel;
inline constexpr GridSemantics kArbitrary = GridSemantics::kArbitrary;

// A grid dimension: a size, or a traced integer scalar, which sizes the grid when the call runs
// (megablox's number of active tiles); a negative size runs no step.
struct GridDim {
  GridDim(int size) : size(size) {}
  GridDim(int64_t size) : size(size) {}
  GridDim(Tracer traced) : traced(std::move(traced)), size(-1) {}
  Tracer traced;
  int64_t size;
};

// Scratch semaphore arrays (pltpu.SemaphoreType.REGULAR / .DMA): counting semaphores that
// semaphore_signal / semaphore_wait use, and DMA semaphores that count the bytes of finished
// copies. `dims` makes an array of them (pick one with ref.at({i})).
inline ShapedType Semaphores(std::vector<int64_t> dims = {}) {
  return ShapedType::SemaphoreRef(ir::Semaphore::kRegular, std::move(dims)).Array();
}
inline ShapedType DmaSemaphores(std::vector<int64_t> dims = {}) {
  return ShapedType::SemaphoreRef(ir::Semaphore::kDma, std::move(dims)).Array();
}

struct PallasCallSpec {
  std::vector<ShapedType> out_shapes;
  std::vector<GridDim> grid;
  // One per operand after the scalar-prefetch ones; empty: every operand is one whole block.
  std::vector<BlockSpec> in_specs;
  std::vector<BlockSpec> out_specs;
  std::vector<ShapedType> scratch_shapes;
  // The first operands are small s32 arrays that index maps and the kernel read.
  int num_scalar_prefetch = 0;
  std::vector<GridSemantics> dimension_semantics;
  // operand index (counting scalar-prefetch operands) -> the output that starts as it.
  std::map<int, int> input_output_aliases;
  std::string name;
  // Gives the kernel a barrier semaphore (Pallas' collective_id): get_barrier_semaphore().
  bool barrier_semaphore = false;
};

// The kernel: takes the refs (scalar prefetch, inputs, outputs, scratch, in that order) as
// separate pl::Ref parameters or as one const std::vector<pl::Ref>&.
struct Kernel {
  std::function<void(const std::vector<Ref>&)> fn;
  int arity = -1;  // the number of Ref parameters; -1 when it takes a vector
};

class PallasCall {
 public:
  PallasCall(Kernel kernel, PallasCallSpec spec)
      : kernel_(std::move(kernel)), spec_(std::move(spec)) {}
  // Traces the call on `args` (scalar-prefetch operands first): one tracer per out_shape.
  std::vector<Tracer> operator()(const std::vector<Tracer>& args, Loc loc = Loc::current()) const;
  // A call without operands (its kernel only writes outputs).
  std::vector<Tracer> operator()(Loc loc = Loc::current()) const {
    return (*this)(std::vector<Tracer>{}, loc);
  }
  template <typename... T>
  std::vector<Tracer> operator()(Tracer first, T... rest) const {
    return (*this)(std::vector<Tracer>{std::move(first), Tracer(rest)...});
  }

 private:
  Kernel kernel_;
  PallasCallSpec spec_;
};

namespace kernel_internal {
template <typename F>
Kernel MakeKernel(F f) {
  if constexpr (std::is_invocable_v<F, const std::vector<Ref>&>) {
    return {std::move(f), -1};
  } else {
    constexpr int n = shardjit::internal::CallTraits<std::decay_t<F>>::arity;
    return {[f](const std::vector<Ref>& refs) {
              [&]<size_t... I>(std::index_sequence<I...>) { f(refs[I]...); }(
                  std::make_index_sequence<n>{});
            },
            n};
  }
}
}  // namespace kernel_internal

// pl.pallas_call(kernel, out_shape, grid, in_specs, out_specs, scratch_shapes, ...).
template <typename F>
PallasCall pallas_call(F kernel, PallasCallSpec spec) {
  return PallasCall(kernel_internal::MakeKernel(std::move(kernel)), std::move(spec));
}

// Inside a kernel: the grid index along `axis` and the grid's size there (s32 scalars).
Tracer program_id(int64_t axis, Loc loc = Loc::current());
Tracer num_programs(int64_t axis, Loc loc = Loc::current());
// pl.when: runs `body` (which stores into refs) only where `cond` (a scalar) holds.
void when(Tracer cond, const std::function<void()>& body, Loc loc = Loc::current());
// pl.dot: a @ b (rank 2, optionally transposed) computed in `preferred_element_type`.
Tracer dot(Tracer a, Tracer b, DType preferred_element_type = DType::kInvalid,
           bool trans_a = false, bool trans_b = false, Loc loc = Loc::current());
// Which device a remote copy or signal goes to: mesh coordinates by axis name (axes not named
// keep this device's coordinate; Pallas' DeviceIdType.MESH over any number of axes), or one
// row-major position over the whole mesh (DeviceIdType.LOGICAL).
class DeviceId {
 public:
  DeviceId() = default;
  DeviceId(std::vector<std::pair<std::string, Index>> coords) : coords_(std::move(coords)) {}
  static DeviceId Logical(Index id) {
    DeviceId d;
    d.logical_ = true;
    d.coords_.emplace_back("", std::move(id));
    return d;
  }
  bool logical() const { return logical_; }
  const std::vector<std::pair<std::string, Index>>& coords() const { return coords_; }
  bool self() const { return coords_.empty(); }

 private:
  std::vector<std::pair<std::string, Index>> coords_;
  bool logical_ = false;
};

// Adds `inc` to semaphore `sem` on `device` (this one by default): pltpu.semaphore_signal.
void semaphore_signal(View sem, Index inc = 1, DeviceId device = {}, Loc loc = Loc::current());
// Waits until `sem` holds at least `value`, then takes it: pltpu.semaphore_wait.
void semaphore_wait(View sem, Index value = 1, Loc loc = Loc::current());
// The value of `sem` now: pltpu.semaphore_read.
Tracer semaphore_read(View sem, Loc loc = Loc::current());
// The barrier semaphore of a call made with PallasCallSpec::barrier_semaphore.
Ref get_barrier_semaphore(Loc loc = Loc::current());

// An asynchronous copy (pltpu.make_async_copy / make_async_remote_copy): start() copies the
// window `src` into the window `dst` (on `device` for a remote copy) and counts its bytes on
// `dst_sem` there and on `src_sem` here; wait() waits until they are counted.
class AsyncCopy {
 public:
  AsyncCopy(View src, View dst, View dst_sem, std::optional<View> src_sem, DeviceId device)
      : src_(std::move(src)), dst_(std::move(dst)), dst_sem_(std::move(dst_sem)),
        src_sem_(std::move(src_sem)), device_(std::move(device)) {}
  void start(Loc loc = Loc::current()) const;
  // wait_recv (and wait_send before it for a remote copy).
  void wait(Loc loc = Loc::current()) const;
  // Waits until the copy has left (its bytes counted on src_sem).
  void wait_send(Loc loc = Loc::current()) const;
  // Waits until the copy has arrived (its bytes counted on dst_sem, on this device: the copy a
  // peer sent here by the same code).
  void wait_recv(Loc loc = Loc::current()) const;

 private:
  View src_, dst_, dst_sem_;
  std::optional<View> src_sem_;
  DeviceId device_;
};

inline AsyncCopy make_async_copy(View src, View dst, View sem) {
  return AsyncCopy(std::move(src), std::move(dst), std::move(sem), std::nullopt, {});
}
inline AsyncCopy make_async_remote_copy(View src, View dst, View send_sem, View recv_sem,
                                        DeviceId device_id) {
  return AsyncCopy(std::move(src), std::move(dst), std::move(recv_sem), std::move(send_sem),
                   std::move(device_id));
}

// ceil(a / b) for grid sizes.
constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace shardjit::pl

#endif  // SHARDJIT_FRONTEND_PALLAS_H_
