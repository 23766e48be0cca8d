#include "runtime/kernel_exchange.h"

#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/tensor.h"
#include "ir/types.h"

namespace shardjit::runtime {

struct KernelExchange::Instance {
  int64_t entered = 0;  // instances begun
  bool inside = false;  // the last one has not ended
  absl::Status outcome;  // how the last one ended, once it has
  const ir::Op* call = nullptr;
  std::vector<backends::KernelBuffer> buffers;
  std::optional<backends::SemaphoreValues> semaphores;
  int64_t writers = 0;  // peers copying into it now
  // Copies and signals from other processes for instances not yet entered.
  std::vector<RemoteKernelOp> early;
};

class KernelExchange::Peers final : public backends::KernelPeers {
 public:
  Peers(KernelExchange& x, int64_t position) : x_(x), core_(x.core_), position_(position) {}

  const ir::Mesh& mesh() const override { return core_.mesh(); }
  int64_t position() const override { return position_; }
  int64_t DeviceAt(int64_t position) const override { return core_.DeviceOf(position); }

  absl::Status Enter(const ir::Op& call, std::vector<backends::KernelBuffer> buffers) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    Instance& me = *x_.instances_[position_];
    ++me.entered;
    me.outcome = absl::OkStatus();
    me.inside = true;
    me.call = &call;
    me.semaphores.emplace(buffers);
    me.buffers = std::move(buffers);
    core_.CountArrival();
    // What other processes sent this instance before it started.
    std::vector<RemoteKernelOp> early;
    for (auto it = me.early.begin(); it != me.early.end();) {
      if (it->instance == me.entered) {
        early.push_back(std::move(*it));
        it = me.early.erase(it);
      } else {
        ++it;
      }
    }
    for (const RemoteKernelOp& op : early) {
      if (absl::Status s = x_.Apply(lock, op); !s.ok()) {
        Leave(lock, me, s);  // the kernel does not run: no Exit follows
        return s;
      }
    }
    // Peers waiting for this instance to start may go on.
    for (int64_t p = 0; p < core_.size(); ++p) {
      const KernelWait* wait = core_.waiting(p).kernel;
      if (wait != nullptr && wait->peer == position_) core_.Wake(p);
    }
    return absl::OkStatus();
  }

  void Exit(const absl::Status& outcome) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    Leave(lock, *x_.instances_[position_], outcome);
  }

  absl::Status CopyTo(int64_t target, int param, const backends::WindowCopy& copy,
                      backends::SemaphoreSlot sem, std::string_view where) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    if (IsRemote(target)) {
      // The window's elements travel in a message; the receiver writes them in place.
      RemoteKernelOp op = RemoteOp(target, sem, copy.bytes());
      op.param = param;
      op.dst_type = copy.dst_type;
      op.to_offset = copy.to.offset;
      op.to_strides = copy.to.strides;
      lock.unlock();
      op.data = ir::Tensor::Empty(ir::ShapedType{copy.dst_type.dtype, copy.dims},
                                  ir::HostAllocator());
      backends::WindowCopy pack = copy;
      pack.to = {0, ir::RowMajorStrides(copy.dims)};
      backends::CopyWindow(pack, op.data.data());
      core_.remote()->PostKernelOp(op);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Instance * peer, Meet(lock, target, where));
    if (param < 0 || param >= static_cast<int>(peer->buffers.size()) ||
        peer->buffers[param].data == nullptr) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: copies into param {} of device {}'s instance, not a buffer it offers: copies to "
          "other devices go to scratch buffers, whole-array (ANY) outputs and inputs its kernel's "
          "dma_starts copy into, not to blocks (which change at every grid step)",
          where, param, core_.DeviceOf(target)));
    }
    if (peer->buffers[param].type.Array() != copy.dst_type) {
      return absl::FailedPreconditionError(fmt::format(
          "{}: dst is {} here but {} on device {} (its kernel differs)", where,
          copy.dst_type.ToString(), peer->buffers[param].type.Array().ToString(),
          core_.DeviceOf(target)));
    }
    int64_t* value = peer->semaphores->Find(sem);
    if (value == nullptr) return NoSemaphore(target, sem, where);
    x_.Deposit(lock, target, &copy, param, value, copy.bytes());
    return absl::OkStatus();
  }

  absl::Status Signal(int64_t target, backends::SemaphoreSlot sem, int64_t inc,
                      std::string_view where) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    if (IsRemote(target)) {
      const RemoteKernelOp op = RemoteOp(target, sem, inc);
      lock.unlock();
      core_.remote()->PostKernelOp(op);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Instance * peer, Meet(lock, target, where));
    int64_t* value = peer->semaphores->Find(sem);
    if (value == nullptr) return NoSemaphore(target, sem, where);
    x_.Deposit(lock, target, nullptr, -1, value, inc);
    return absl::OkStatus();
  }

  absl::Status Wait(backends::SemaphoreSlot sem, int64_t n, std::string_view where,
                    std::string_view what) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    Instance& me = *x_.instances_[position_];
    int64_t* value = me.semaphores ? me.semaphores->Find(sem) : nullptr;
    if (value == nullptr) return NoSemaphore(position_, sem, where);
    const KernelWait wait{where, what, n, -1, me.entered, value};
    RunCore::Waiting waiting;
    waiting.kernel = &wait;
    core_.ParkUntil(lock, position_, waiting, [&] { return *value >= n; });
    if (*value < n) return core_.CancelledError(position_, core_.failure());
    *value -= n;
    core_.CountArrival();
    return absl::OkStatus();
  }

  int64_t Read(backends::SemaphoreSlot sem) override {
    std::unique_lock<SpinMutex> lock(core_.mu());
    Instance& me = *x_.instances_[position_];
    const int64_t* value = me.semaphores ? me.semaphores->Find(sem) : nullptr;
    return value != nullptr ? *value : 0;
  }

 private:
  // Ends instance `me` with `outcome` once no peer copies into it; under mu.
  void Leave(std::unique_lock<SpinMutex>& lock, Instance& me, const absl::Status& outcome) {
    me.inside = false;
    me.outcome = outcome;
    // A copy in flight runs on its sender's thread, never on this one (it does not park while
    // it copies), so waiting for it lets that thread finish it.
    while (me.writers > 0) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    me.buffers.clear();
    me.semaphores.reset();
    core_.CountArrival();
  }

  // `target`'s instance matching this position's current one, once it has started; under mu
  // (released while waiting).
  absl::StatusOr<Instance*> Meet(std::unique_lock<SpinMutex>& lock, int64_t target,
                                 std::string_view where) {
    const Instance& me = *x_.instances_[position_];
    if (target == position_) return x_.instances_[position_].get();
    if (target < 0 || target >= core_.size()) {
      return absl::OutOfRangeError(fmt::format("{}: no device at mesh position {}", where, target));
    }
    const int64_t k = me.entered;
    Instance& peer = *x_.instances_[target];
    const KernelWait wait{where, {}, 0, target, k};
    RunCore::Waiting waiting;
    waiting.kernel = &wait;
    core_.ParkUntil(lock, position_, waiting, [&] { return peer.entered >= k; });
    if (peer.entered < k) return core_.CancelledError(position_, core_.failure());
    // The peer's instance failed: that is the run's failure, not this copy's.
    if (peer.entered == k && !peer.inside && !peer.outcome.ok()) {
      return core_.CancelledError(position_, peer.outcome);
    }
    if (peer.entered > k || !peer.inside) {
      return absl::FailedPreconditionError(fmt::format(
          "{}: device {} has already left its instance of the kernel; a kernel must wait for the "
          "copies and signals sent to it before it ends",
          where, core_.DeviceOf(target)));
    }
    return &peer;
  }

  bool IsRemote(int64_t target) const {
    return target >= 0 && target < core_.size() && core_.remote() != nullptr &&
           !core_.remote()->IsLocal(target);
  }
  // A message to `target`'s instance matching this one adding `amount` to `sem`; under mu.
  RemoteKernelOp RemoteOp(int64_t target, backends::SemaphoreSlot sem, int64_t amount) const {
    RemoteKernelOp op;
    op.source = position_;
    op.target = target;
    op.instance = x_.instances_[position_]->entered;
    op.sem_param = sem.param;
    op.sem_index = sem.index;
    op.amount = amount;
    return op;
  }

  absl::Status NoSemaphore(int64_t target, backends::SemaphoreSlot sem,
                           std::string_view where) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: device {}'s instance has no semaphore {}[{}] (its kernel differs)",
                    where, core_.DeviceOf(target), sem.param, sem.index));
  }

  KernelExchange& x_;
  RunCore& core_;
  const int64_t position_;
};

KernelExchange::KernelExchange(RunCore& core) : core_(core) {
  for (int64_t p = 0; p < core.size(); ++p) {
    instances_.push_back(std::make_unique<Instance>());
    peers_.push_back(std::make_unique<Peers>(*this, p));
  }
}

KernelExchange::~KernelExchange() = default;

backends::KernelPeers* KernelExchange::PeersOf(int64_t position) {
  return peers_[position].get();
}

void KernelExchange::Deliver(RemoteKernelOp op) {
  std::unique_lock<SpinMutex> lock(core_.mu());
  Instance& target = *instances_[op.target];
  absl::Status status;
  if (target.entered < op.instance) {
    target.early.push_back(std::move(op));  // applied when the device enters that instance
  } else {
    status = Apply(lock, op);
  }
  if (status.ok()) return;
  lock.unlock();
  core_.Cancel(status, /*post=*/true);
}

absl::Status KernelExchange::Apply(std::unique_lock<SpinMutex>& lock, const RemoteKernelOp& op) {
  Instance& target = *instances_[op.target];
  const std::string what = fmt::format(
      "a kernel {} from device {} to device {}", op.data.defined() ? "copy" : "signal",
      core_.DeviceOf(op.source), core_.DeviceOf(op.target));
  // An instance that ended in failure: that failure is the run's; the message is moot.
  if (target.entered == op.instance && !target.inside && !target.outcome.ok()) {
    return absl::OkStatus();
  }
  if (target.entered != op.instance || !target.inside) {
    return absl::FailedPreconditionError(fmt::format(
        "{} came after device {} left its instance of the kernel; a kernel must wait for the "
        "copies and signals sent to it before it ends",
        what, core_.DeviceOf(op.target)));
  }
  int64_t* value = target.semaphores->Find({op.sem_param, op.sem_index});
  if (value == nullptr) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the kernel there has no semaphore {}[{}] (its kernel differs)", what, op.sem_param,
        op.sem_index));
  }
  if (op.data.defined()) {
    const bool fits = op.param >= 0 && op.param < static_cast<int>(target.buffers.size()) &&
                      target.buffers[op.param].data != nullptr &&
                      target.buffers[op.param].type.Array() == op.dst_type;
    if (!fits) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: param {} there is not a whole-array ref or scratch buffer of type {}", what,
          op.param, op.dst_type.ToString()));
    }
    // The window must lie inside the buffer (the message comes from another process).
    __int128 last = op.to_offset;
    bool inside = op.to_offset >= 0 && op.to_strides.size() == op.data.dims().size();
    for (size_t d = 0; inside && d < op.to_strides.size(); ++d) {
      inside = op.to_strides[d] >= 0 && op.to_strides[d] <= op.dst_type.num_elements();
      if (op.data.dims()[d] > 0) last += __int128{op.data.dims()[d] - 1} * op.to_strides[d];
    }
    if (!inside || (op.data.num_elements() > 0 && last >= op.dst_type.num_elements())) {
      return absl::InvalidArgumentError(
          fmt::format("{}: its window leaves the {} buffer", what, op.dst_type.ToString()));
    }
    const backends::WindowCopy copy{op.data.data(), {0, ir::RowMajorStrides(op.data.dims())},
                                    op.data.dims(), ir::DTypeSize(op.data.dtype()), op.dst_type,
                                    {op.to_offset, op.to_strides}};
    Deposit(lock, op.target, &copy, op.param, value, op.amount);
  } else {
    Deposit(lock, op.target, nullptr, -1, value, op.amount);
  }
  return absl::OkStatus();
}

void KernelExchange::Deposit(std::unique_lock<SpinMutex>& lock, int64_t target,
                             const backends::WindowCopy* copy, int param, int64_t* value,
                             int64_t amount) {
  Instance& instance = *instances_[target];
  if (copy != nullptr) {
    // Counted as a writer, the instance (its buffers and semaphores) outlives the copy.
    ++instance.writers;
    void* const data = instance.buffers[param].data;
    lock.unlock();
    backends::CopyWindow(*copy, data);
    lock.lock();
    --instance.writers;
  }
  *value += amount;
  core_.CountArrival();
  core_.Wake(target);
}

absl::Status KernelExchange::StallError(int64_t position, const KernelWait& wait,
                                        absl::Duration waited) const {
  if (wait.peer >= 0) {
    return absl::DeadlineExceededError(fmt::format(
        "{} on device {}: waited {} for device {} to start its instance of the kernel (it has "
        "started {} kernels with semaphores, this device {})",
        wait.where, core_.DeviceOf(position), absl::FormatDuration(waited),
        core_.DeviceOf(wait.peer), instances_[wait.peer]->entered, wait.instance));
  }
  std::vector<int64_t> inside, left, before, elsewhere;
  for (int64_t p = 0; p < core_.size(); ++p) {
    if (p == position) continue;
    const Instance& other = *instances_[p];
    const int64_t device = core_.DeviceOf(p);
    if (core_.remote() != nullptr && !core_.remote()->IsLocal(p)) {
      elsewhere.push_back(device);
    } else if (other.entered == wait.instance && other.inside) {
      inside.push_back(device);
    } else if (other.entered >= wait.instance) {
      left.push_back(device);
    } else {
      before.push_back(device);
    }
  }
  return absl::DeadlineExceededError(fmt::format(
      "{} on device {}: {} waited {} for {} and holds {}; devices [{}] are in this kernel, "
      "[{}] have left it, [{}] have not reached it{}",
      wait.where, core_.DeviceOf(position), wait.semaphore, absl::FormatDuration(waited),
      wait.need, wait.value != nullptr ? *wait.value : 0, absl::StrJoin(inside, ","),
      absl::StrJoin(left, ","), absl::StrJoin(before, ","),
      elsewhere.empty() ? ""
                        : fmt::format(", [{}] run in other processes",
                                      absl::StrJoin(elsewhere, ","))));
}

}  // namespace shardjit::runtime
