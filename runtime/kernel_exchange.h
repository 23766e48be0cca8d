// Where the instances of pallas_call kernels on the devices of one run meet (a part of the run's
// fabric, runtime/fabric.h): each device's current instance (its buffers and semaphores), the
// copies and signals peers send into it, and the waits on its semaphores. A device that waits
// (for a semaphore, or for a peer to reach the instance it copies into) parks under the run's
// lock (run_core.h) and is woken by the signal that satisfies it; a run that fails wakes it.
//
// Instances meet by count (backends/kernel_peers.h): device p's k-th kernel with semaphores
// meets device q's k-th. Copies run on the sender's thread straight into the receiver's buffer;
// a receiver leaving its instance waits until no copy into it is in flight. A copy or signal to a
// device of another process travels as a message (RemotePeers::PostKernelOp) without waiting;
// the receiving process applies it when its device is in that instance (holding it until then)
// and fails the run if the device has already left it.
#ifndef SHARDJIT_RUNTIME_KERNEL_EXCHANGE_H_
#define SHARDJIT_RUNTIME_KERNEL_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backends/kernel_peers.h"
#include "runtime/remote.h"
#include "runtime/run_core.h"

namespace shardjit::runtime {

// What a device parked in a kernel waits for (RunCore::Waiting::kernel).
struct KernelWait {
  std::string_view where;      // the op, kernel and grid index
  std::string_view semaphore;  // the semaphore it waits on; empty when it waits for `peer`
  int64_t need = 0;
  int64_t peer = -1;  // the position whose instance it waits to start; else -1
  int64_t instance = 0;  // the waiting position's instance count
  const int64_t* value = nullptr;  // the semaphore's value
};

class KernelExchange {
 public:
  explicit KernelExchange(RunCore& core);
  ~KernelExchange();

  // The KernelPeers of mesh position `position` (lives as long as the exchange).
  backends::KernelPeers* PeersOf(int64_t position);

  // A copy or signal another process sent to local position `op.target`. Takes mu.
  void Deliver(RemoteKernelOp op);

  // The error for a position that waited `waited` in a kernel without progress, describing what
  // it waits for and where the other devices are; under mu.
  absl::Status StallError(int64_t position, const KernelWait& wait, absl::Duration waited) const;

 private:
  class Peers;  // KernelPeers of one position
  struct Instance;

  // Applies `op` to its target's current instance; an error if the target is not in it. Under
  // mu (released while it copies).
  absl::Status Apply(std::unique_lock<SpinMutex>& lock, const RemoteKernelOp& op);
  // Runs `copy` (when given) into buffer `param` of position `target`'s instance, outside the
  // lock, then adds `amount` to its semaphore `value` and wakes it. Under mu.
  void Deposit(std::unique_lock<SpinMutex>& lock, int64_t target,
               const backends::WindowCopy* copy, int param, int64_t* value, int64_t amount);

  RunCore& core_;
  std::vector<std::unique_ptr<Instance>> instances_;  // per position: its current instance
  std::vector<std::unique_ptr<Peers>> peers_;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_KERNEL_EXCHANGE_H_
