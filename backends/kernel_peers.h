// How a pallas_call kernel reaches its instances on the other devices of a run (Pallas' remote
// DMA and semaphores): the runtime implements KernelPeers for SPMD runs
// (runtime/kernel_exchange.h); LocalKernelPeers serves a device that runs alone.
//
// Instances meet by count: the k-th kernel with semaphores that device p enters meets the k-th
// that device q enters. A copy or signal to q waits until q has entered that instance and fails
// if q has already left it; a device leaving an instance waits until copies into it have ended.
#ifndef SHARDJIT_BACKENDS_KERNEL_PEERS_H_
#define SHARDJIT_BACKENDS_KERNEL_PEERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/ir.pb.h"
#include "ir/shaped_type.h"

namespace shardjit::backends {

// One semaphore of an instance: element `index` (row-major) of semaphore-array param `param`.
struct SemaphoreSlot {
  int param = -1;
  int64_t index = 0;
};

// The memory of one kernel param of an instance: what peers copy into. `data` is null for
// params peers may not write (blocks that change from step to step) and for semaphores.
struct KernelBuffer {
  void* data = nullptr;
  ir::ShapedType type;
};

// Where a window lies in a buffer: its first element and the element strides of its dimensions.
struct Window {
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// A copy of a `dims` window of `elem`-byte elements from `src` (window `from`) into the window
// `to` of a buffer holding a `dst_type` array.
struct WindowCopy {
  const void* src = nullptr;
  Window from;
  std::vector<int64_t> dims;
  int64_t elem = 0;
  ir::ShapedType dst_type;
  Window to;

  int64_t bytes() const;
};

// Runs `copy` into `dst` (the whole buffer).
void CopyWindow(const WindowCopy& copy, void* dst);

class KernelPeers {
 public:
  virtual ~KernelPeers() = default;

  // The run's mesh (empty when the device runs alone) and this device's row-major position.
  virtual const ir::Mesh& mesh() const = 0;
  virtual int64_t position() const = 0;
  // The runtime's id of the device at `position`, for messages.
  virtual int64_t DeviceAt(int64_t position) const = 0;

  // Starts this device's next instance of kernel `call`, whose params hold `buffers`; its
  // semaphores (the params of semaphore type) start at 0.
  virtual absl::Status Enter(const ir::Op& call, std::vector<KernelBuffer> buffers) = 0;
  // Ends the instance once no peer copies into it any more, with the kernel's `outcome`. Called
  // after every Enter, also when the kernel failed: a peer that then copies or signals to it
  // gets that failure (as a cancellation), not an error of its own.
  virtual void Exit(const absl::Status& outcome) = 0;

  // `where` names the kernel and grid index in messages ("kernel ring at grid index (0)").
  // Runs `copy` into buffer `param` of `target`'s matching instance (whose type must be
  // copy.dst_type), then adds the bytes copied to its semaphore `sem`. On return `copy.src` may
  // change (a copy to another process has taken its bytes).
  virtual absl::Status CopyTo(int64_t target, int param, const WindowCopy& copy,
                              SemaphoreSlot sem, std::string_view where) = 0;
  // Adds `inc` to semaphore `sem` of `target`'s matching instance.
  virtual absl::Status Signal(int64_t target, SemaphoreSlot sem, int64_t inc,
                              std::string_view where) = 0;
  // Waits until this instance's semaphore `sem` (named `what` in messages) holds at least `n`,
  // then takes `n` from it.
  virtual absl::Status Wait(SemaphoreSlot sem, int64_t n, std::string_view where,
                            std::string_view what) = 0;
  // The value of this instance's semaphore `sem`.
  virtual int64_t Read(SemaphoreSlot sem) = 0;
};

// What dma_start does once its windows, semaphores and target are known: `copy` into the dst
// ref here (`local_dst`, its whole buffer) when `target` is this device, else into param
// `dst_param` of `target`'s instance; then its bytes are counted on `dst_sem` there and, for a
// remote copy (`src_sem` given), on `src_sem` here.
absl::Status StartDma(KernelPeers& peers, int64_t target, const WindowCopy& copy,
                      void* local_dst, int dst_param, SemaphoreSlot dst_sem,
                      const SemaphoreSlot* src_sem, std::string_view where);

// The KernelPeers of the device whose program calls a backend's pallas_call kernel (a
// reference::Kernel, which gets no DeviceContext): the evaluator sets it for the call and clears
// it after, and the kernel reads it on entry, before it can park. (Devices share threads: one
// that parks in a kernel lets another set its own, so the value is only good until then.)
KernelPeers* CurrentKernelPeers();
class ScopedKernelPeers {
 public:
  explicit ScopedKernelPeers(KernelPeers* peers);
  ~ScopedKernelPeers();
  ScopedKernelPeers(const ScopedKernelPeers&) = delete;
  ScopedKernelPeers& operator=(const ScopedKernelPeers&) = delete;
};

// The position of the device that `values` name, seen from `self` on `mesh`: one coordinate per
// axis of `axes` (the other axes keep `self`'s), or with `logical` one row-major position; no
// values: `self`. A device outside the mesh is an error naming it, for `where`.
absl::StatusOr<int64_t> TargetPosition(const ir::Mesh& mesh, int64_t self,
                                       const std::vector<std::string>& axes, bool logical,
                                       const std::vector<int64_t>& values, std::string_view where);

// The semaphores of one instance: a value per element of each semaphore-array param.
class SemaphoreValues {
 public:
  explicit SemaphoreValues(const std::vector<KernelBuffer>& buffers);
  // Null when `sem` is not a semaphore of the instance.
  int64_t* Find(SemaphoreSlot sem);

 private:
  std::vector<std::vector<int64_t>> values_;  // per param (empty: not a semaphore)
};

// KernelPeers for a device running alone (no mesh): copies and signals go to itself, and a wait
// that its semaphore cannot satisfy fails at once, as nothing else could signal it.
class LocalKernelPeers final : public KernelPeers {
 public:
  const ir::Mesh& mesh() const override { return mesh_; }
  int64_t position() const override { return 0; }
  int64_t DeviceAt(int64_t position) const override { return position; }
  absl::Status Enter(const ir::Op& call, std::vector<KernelBuffer> buffers) override;
  void Exit(const absl::Status& outcome) override;
  absl::Status CopyTo(int64_t target, int param, const WindowCopy& copy, SemaphoreSlot sem,
                      std::string_view where) override;
  absl::Status Signal(int64_t target, SemaphoreSlot sem, int64_t inc,
                      std::string_view where) override;
  absl::Status Wait(SemaphoreSlot sem, int64_t n, std::string_view where,
                    std::string_view what) override;
  int64_t Read(SemaphoreSlot sem) override;

 private:
  ir::Mesh mesh_;
  std::vector<KernelBuffer> buffers_;
  std::optional<SemaphoreValues> semaphores_;  // of the instance entered and not left
};

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_KERNEL_PEERS_H_
