// How the in-process fabric (runtime/fabric.h) reaches devices in other processes. A job of
// several processes gives every process the whole mesh; each runs the mesh positions whose devices
// it owns, and stands in for the others with what they send: a remote position's arrival at a
// collective (its operands, or only their types where no local member reads them), a psend to a
// local target, or the failure of the run. The fabric then computes every local result with the
// same code as in one process, from the same operands in the same order, so results are bitwise
// identical to an in-process run. A large all-reduce over members in several processes is split
// among them (a reduce-scatter, then an all-gather): each process receives from the others only
// the share of their operands it reduces, reduces it in member order (as one process would), and
// sends the reduced share to the others. runtime/distributed/ implements these interfaces over
// Gloo.
#ifndef SHARDJIT_RUNTIME_REMOTE_H_
#define SHARDJIT_RUNTIME_REMOTE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/tensor.h"

namespace shardjit::ir {
class Mesh;
}  // namespace shardjit::ir

namespace shardjit::runtime {

class RunState;
struct ResolvedCollective;

// Elements [begin, end) of a tensor, in row-major order.
struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// A pallas_call kernel's copy or signal from mesh position `source` to remote position `target`
// (runtime/kernel_exchange.h): into the target's `instance`-th kernel with semaphores (counted
// from 1), add `amount` to semaphore (`sem_param`, `sem_index`); a copy (`data` defined: the
// window's elements, row-major) first writes `data` into the window `to_offset`/`to_strides` of
// its buffer `param`, which holds a `dst_type` array.
struct RemoteKernelOp {
  int64_t source = 0;
  int64_t target = 0;
  int64_t instance = 0;
  int sem_param = -1;
  int64_t sem_index = 0;
  int64_t amount = 0;
  int param = -1;
  ir::ShapedType dst_type;
  int64_t to_offset = 0;
  std::vector<int64_t> to_strides;
  ir::Tensor data;
};

// The cross-process half of one run, as the fabric sees it. Posts never block: they queue the
// message (the tensors stay alive until sent) and return.
class RemotePeers {
 public:
  virtual ~RemotePeers() = default;

  // The process that runs mesh position `position`, and whether that is this one.
  virtual int ProcessOf(int64_t position) const = 0;
  virtual bool IsLocal(int64_t position) const = 0;

  // Sends local position `position`'s arrival at its `seq`-th collective to `processes`: with its
  // operands to those where `with_data` is true, with only their types to the others. With
  // `shares` (one per process), a split all-reduce's: only elements `shares[i]` of its operand go
  // to `processes[i]`.
  virtual void PostArrival(int64_t seq, int64_t position, const ResolvedCollective& resolved,
                           const std::vector<ir::Tensor>& operands,
                           const std::vector<int>& processes, const std::vector<bool>& with_data,
                           const std::vector<ElementRange>& shares) = 0;
  // Local position `position`, arrived at its `seq`-th collective, will read the operands of
  // remote `sources`, of types `types` (its own: a group agrees on them, and a member whose
  // types differ fails the run): the transport may post their receives now, before they are
  // sent. A hint: they are delivered as arrivals all the same. `destinations` (empty, or one per
  // source) are tensors of the first operand's type (views into the collective's result) the
  // transport may receive that source's first operand into, and deliver as it. A split
  // all-reduce's sources send only elements `share` of their operand (`share` empty: all).
  virtual void ExpectOperands(int64_t seq, const std::vector<int64_t>& sources,
                              const std::vector<ir::ShapedType>& types,
                              const std::vector<ir::Tensor>& destinations,
                              const ElementRange& share) {}
  // A split all-reduce's result: sends elements `piece` of `out`, which this process reduced for
  // its `seq`-th collective of the group whose first member is `key`, to `processes`.
  virtual void PostReduced(int64_t seq, int64_t key, const ir::Tensor& out,
                           const ElementRange& piece, const std::vector<int>& processes) = 0;
  // Elements `piece` of that result will come from `process`: the transport may post their
  // receive into `out` now. A hint: they are delivered (RunState::DeliverReduced) all the same.
  virtual void ExpectReduced(int64_t seq, int64_t key, int process, const ir::Tensor& out,
                             const ElementRange& piece) {}
  // Sends a psend's operand from local position `source` to remote position `target`.
  virtual void PostMail(int64_t source, int64_t target, const ir::Tensor& x) = 0;
  // Sends a kernel's copy or signal to the process running `op.target`.
  virtual void PostKernelOp(const RemoteKernelOp& op) = 0;
  // Tells every other process of the run that it failed with `status`.
  virtual void PostFailure(const absl::Status& status) = 0;
};

// The processes of a distributed job, as the runtime sees them.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int process_id() const = 0;
  virtual int num_processes() const = 0;

  // Connects `run` (over `mesh`, whose position p runs in process `process_of[p]`) to the other
  // processes of the run until the returned object is destroyed: messages for it are delivered to
  // `run`, those that came before it started included. Every process of the run must begin the
  // runs it shares with the others in the same order.
  virtual std::unique_ptr<RemotePeers> BeginRun(const ir::Mesh& mesh,
                                                const std::vector<int>& process_of,
                                                RunState& run) = 0;
  // Waits until everything this process posted has been taken by its peers (so that a run may
  // end and the process exit); an error naming the peers that did not take it in time.
  virtual absl::Status Flush() = 0;

  // Sends `blocks` (tensors with their offsets in a host array) to every other process and
  // returns every block the others sent for the same call. All processes must call it the same
  // number of times; the k-th calls meet.
  struct Block {
    std::vector<int64_t> offset;
    ir::Tensor data;
  };
  virtual absl::StatusOr<std::vector<Block>> ExchangeBlocks(const std::vector<Block>& blocks) = 0;

  // The value process 0 gives for `key` (all processes call it with their own): a way to make
  // every process take the same decisions, e.g. a plan priced by process 0's measured rates.
  virtual absl::StatusOr<std::string> AgreeOn(const std::string& key,
                                              const std::string& value) = 0;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_REMOTE_H_
