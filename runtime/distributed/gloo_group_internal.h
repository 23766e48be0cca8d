// The Gloo process group's classes, shared by its two files: gloo_process_group.cc (the group,
// its runs and the job-level exchanges) and gloo_messages.cc (how messages travel: posting and
// completing sends, receiving envelopes and what follows them). Internal to them.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_GROUP_INTERNAL_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_GROUP_INTERNAL_H_

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/collective_plan.h"
#include "runtime/device.h"
#include "runtime/distributed/gloo_process_group.h"
#include "runtime/distributed/wire.h"
#include "runtime/fabric.h"

namespace shardjit::runtime::distributed {

using Buffer = gloo::transport::UnboundBuffer;

// Between two processes, envelopes travel in order on one Gloo slot and what did not fit in them
// (wire.h) in order on another.
constexpr uint64_t kEnvelopeSlot = 0x534a;
constexpr uint64_t kSpillSlot = 0x534b;
// Inline payloads of at least this many bytes are handed on as views of their envelope (no
// copy; the envelope, at most about twice their size, stays allocated while they live).
constexpr int64_t kAdoptedPayloadBytes = 512 << 10;
// Waits that only an abort or a peer's failure may end.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);
// Posted messages are completed (their sends waited for, what they keep alive released) by the
// run's own thread when it ends (Flush); a peer's sending thread completes them meanwhile only
// once more than this many, or this many bytes of tensors, wait.
constexpr size_t kMessagesBeforeReaping = 8;
constexpr int64_t kKeptBytesBeforeReaping = int64_t{64} << 20;
// How often a peer's sending thread checks whether another thread completing its messages has
// passed its deadline (Gloo's own timed wait would fail every connection of the context).
constexpr std::chrono::milliseconds kDeadlineCheckPeriod{250};

// A message posted to a peer: what it sends from stays alive until it is completed (the peer
// has taken every buffer).
struct Outgoing {
  std::unique_ptr<char[]> envelope;  // envelope_bytes, written whole (not zeroed first)
  size_t envelope_bytes = 0;
  std::vector<char> meta;  // when it does not fit in the envelope
  std::vector<ir::Tensor> keep;
  int64_t kept_bytes = 0;                        // of `keep`
  std::vector<std::unique_ptr<Buffer>> buffers;  // the envelope's first
  size_t taken = 0;                              // buffers known to be taken
};

class GlooProcessGroup;

// The cross-process half of one run (RemotePeers), begun by GlooProcessGroup::BeginRun.
class RunLink final : public RemotePeers {
 public:
  RunLink(GlooProcessGroup& group, uint64_t set, uint64_t index, const ir::Mesh& mesh,
          std::vector<int> process_of, std::vector<int> processes, RunState& run)
      : group_(group),
        set_(set),
        index_(index),
        mesh_(mesh),
        process_of_(std::move(process_of)),
        processes_(std::move(processes)),
        run_(run) {}
  ~RunLink() override;

  int ProcessOf(int64_t position) const override { return process_of_[position]; }
  bool IsLocal(int64_t position) const override;
  void PostArrival(int64_t seq, int64_t position, const ResolvedCollective& resolved,
                   const std::vector<ir::Tensor>& operands, const std::vector<int>& processes,
                   const std::vector<bool>& with_data,
                   const std::vector<ElementRange>& shares) override;
  void ExpectOperands(int64_t seq, const std::vector<int64_t>& sources,
                      const std::vector<ir::ShapedType>& types,
                      const std::vector<ir::Tensor>& destinations,
                      const ElementRange& share) override;
  void PostReduced(int64_t seq, int64_t key, const ir::Tensor& out, const ElementRange& piece,
                   const std::vector<int>& processes) override;
  void ExpectReduced(int64_t seq, int64_t key, int process, const ir::Tensor& out,
                     const ElementRange& piece) override;
  void PostMail(int64_t source, int64_t target, const ir::Tensor& x) override;
  void PostKernelOp(const RemoteKernelOp& op) override;
  void PostFailure(const absl::Status& status) override;
  // The messages telling every other process of the run that it failed with `status`.
  std::vector<Message> FailureMessages(const absl::Status& status) const;

  uint64_t set() const { return set_; }
  uint64_t index() const { return index_; }
  const ir::Mesh& mesh() const { return mesh_; }
  RunState& run() { return run_; }
  bool Involves(int process) const {
    return std::find(processes_.begin(), processes_.end(), process) != processes_.end();
  }
  // The devices of this run's mesh that `process` runs, e.g. "[2,3]".
  std::string DevicesOf(int process) const {
    std::vector<int64_t> ids;
    for (size_t p = 0; p < process_of_.size(); ++p) {
      if (process_of_[p] != process) continue;
      ids.push_back(mesh_.device_ids_size() ? mesh_.device_ids(p) : static_cast<int64_t>(p));
    }
    return fmt::format("[{}]", absl::StrJoin(ids, ","));
  }
  // Hands a message of this run to the run, checking it names positions of its sender.
  void Deliver(int peer, Message& m);
  // Tells the run that `process` sends nothing more.
  void MarkGone(int process, const absl::Status& why) {
    std::vector<int64_t> positions;
    for (size_t p = 0; p < process_of_.size(); ++p) {
      if (process_of_[p] == process) positions.push_back(static_cast<int64_t>(p));
    }
    run_.MarkGone(positions, why);
  }

 private:
  Message Start(MessageKind kind) const {
    Message m;
    m.header.kind = static_cast<uint32_t>(kind);
    m.header.run_set = set_;
    m.header.run_index = index_;
    return m;
  }

  GlooProcessGroup& group_;
  const uint64_t set_;
  const uint64_t index_;
  const ir::Mesh mesh_;
  const std::vector<int> process_of_;
  const std::vector<int> processes_;  // sorted
  RunState& run_;
};

class GlooProcessGroup final : public ProcessGroup {
 public:
  // `contexts`: the connections upward (from each process to those of higher rank) and
  // downward, each over a Gloo device of its own (see SendContext).
  GlooProcessGroup(const GlooOptions& options, std::shared_ptr<gloo::rendezvous::Store> store,
                   std::shared_ptr<void> keep_alive,
                   std::array<std::shared_ptr<gloo::rendezvous::Context>, 2> contexts)
      : options_(options),
        store_(std::move(store)),
        keep_alive_(std::move(keep_alive)),
        contexts_(std::move(contexts)),
        peers_(options.size) {
    for (int p = 0; p < options_.size; ++p) {
      if (p == options_.rank) continue;
      peers_[p].receiver = std::thread([this, p] { Receive(p); });
      peers_[p].sender = std::thread([this, p] { ReapSends(p); });
    }
  }
  ~GlooProcessGroup() override;

  int process_id() const override { return options_.rank; }
  int num_processes() const override { return options_.size; }
  std::unique_ptr<RemotePeers> BeginRun(const ir::Mesh& mesh, const std::vector<int>& process_of,
                                        RunState& run) override;
  absl::Status Flush() override;
  absl::StatusOr<std::vector<Block>> ExchangeBlocks(const std::vector<Block>& blocks) override;
  absl::StatusOr<std::string> AgreeOn(const std::string& key, const std::string& value) override;

  // Queues `m` for `peer` (dropped if the peer failed or left: the runs that need it fail).
  void Post(int peer, Message m);
  // Posts the receive of a direct payload from `peer` on `slot` (elements `elements` of a tensor
  // of `type`) into `destination` when it is a tensor of `type`, else into a new one, unless it
  // is posted or taken already.
  void ExpectDirect(int peer, uint64_t run_set, uint64_t run_index, uint64_t slot,
                    const ir::ShapedType& type, std::pair<int64_t, int64_t> elements,
                    const ir::Tensor& destination);
  // The resolution over `mesh` of a collective another process sent the signature of.
  absl::StatusOr<const ResolvedCollective*> RemoteResolved(const ir::Mesh& mesh,
                                                           const std::string& signature);
  void EndRun(RunLink* link);

 private:
  struct Peer {
    std::mutex mu;  // the fields below
    std::condition_variable cv;
    std::deque<std::unique_ptr<Outgoing>> outgoing;  // posted, not yet completed
    int64_t kept_bytes = 0;                           // of the tensors `outgoing` keeps
    bool completing = false;                          // a thread is completing `outgoing`
    std::chrono::steady_clock::time_point deadline;   // the completing thread's
    bool late = false;  // its wait was ended at its deadline (the sending thread's check)
    Buffer* receiving = nullptr;  // the buffer the receiver waits on
    Buffer* sending = nullptr;    // the buffer the completing thread waits on
    bool stop = false;
    std::thread receiver;
    std::thread sender;
  };
  // Per peer: what ended it (under mu_).
  struct PeerState {
    bool failed = false;
    bool left = false;
    std::string reason;
  };

  // The receiving thread of `peer`'s messages.
  void Receive(int peer);
  // Waits for `buffer`'s receive from `peer`; false when stopped.
  bool Await(int peer, Buffer& buffer);
  // Receives what did not fit in an envelope into `data`; false when stopped.
  bool ReceiveSpilled(int peer, void* data, size_t bytes);
  // Receives the direct payload on `slot` (posted ahead, or now) into elements `elements` of `x`
  // (a tensor of `type`); false when stopped.
  bool ReceiveDirect(int peer, const Header& h, uint64_t slot, const ir::ShapedType& type,
                     std::pair<int64_t, int64_t> elements, ir::Tensor& x);
  // A buffer for receiving elements `elements` of `x` from `peer`.
  std::unique_ptr<Buffer> ReceiveInto(int peer, ir::Tensor& x,
                                      std::pair<int64_t, int64_t> elements);
  // Drops the receives posted ahead that will never be taken: those of `peer` (gone, when
  // >= 0), and the tombstones of run (`run_set`, `run_index`) once it has ended.
  void DropDirect(int peer, uint64_t run_set, uint64_t run_index);
  // The message of a received envelope (and what follows it). `adopted`: a payload is a view of
  // `envelope`, which must not be received into again.
  absl::StatusOr<Message> Open(int peer, const ir::Tensor& envelope, bool& adopted);
  void Deliver(int peer, Message m);
  // Completes `peer`'s posted messages, oldest first, on this thread, until none is left
  // (kCompleted) or `deadline` has passed (kLate; what is left stays posted); kBusy at once
  // when another thread is completing them.
  enum class Completion { kCompleted, kBusy, kLate };
  Completion CompleteSends(int peer, std::chrono::steady_clock::time_point deadline);
  // The sending thread of `peer`: completes its messages while too many wait, and ends the
  // wait of another thread completing them at its deadline.
  void ReapSends(int peer);
  // Whether `p`'s sending thread should complete messages now; under p.mu.
  static bool TooManyPosted(const Peer& p) {
    return p.outgoing.size() > kMessagesBeforeReaping || p.kept_bytes > kKeptBytesBeforeReaping;
  }
  // Completes every peer's posted messages on this thread, or waits for the thread completing
  // them; false at `deadline`, with the peers that had not taken them in `late`.
  bool CompleteAllSends(std::chrono::steady_clock::time_point deadline, std::vector<int>& late);
  void MarkFailed(int peer, const std::string& reason);
  // Whether `peer` failed or left: it takes nothing more.
  bool PeerEnded(int peer) {
    std::lock_guard<std::mutex> lock(mu_);
    const PeerState& s = peer_state_[peer];
    return s.failed || s.left;
  }
  // Ends the completing thread's wait for `peer` to take a message (it failed or left).
  void AbortSends(int peer) {
    std::lock_guard<std::mutex> lock(peers_[peer].mu);
    if (peers_[peer].sending != nullptr) peers_[peer].sending->abortWaitSend();
  }
  // The error a run gets for a peer that is gone; under mu_.
  absl::Status PeerGone(int peer, const RunLink& link) const;
  // What this process sends to `peer` travels on the upward context when the peer's rank is
  // higher, else on the downward one; what it receives from `peer`, on the context the peer sends
  // on. So each connection carries payloads one way only, and each context's loop thread (one
  // per Gloo device) either reads them or writes them. On one connection per pair, the loop
  // thread reading a peer's payload kept reading while it kept coming, its own writes waited, and
  // the two directions of an exchange ran in turn.
  gloo::rendezvous::Context& SendContext(int peer) {
    return *contexts_[options_.rank < peer ? 0 : 1];
  }
  gloo::rendezvous::Context& ReceiveContext(int peer) {
    return *contexts_[peer < options_.rank ? 0 : 1];
  }

  const GlooOptions options_;
  const std::shared_ptr<gloo::rendezvous::Store> store_;
  const std::shared_ptr<void> keep_alive_;
  const std::array<std::shared_ptr<gloo::rendezvous::Context>, 2> contexts_;  // upward, downward
  std::vector<Peer> peers_;
  // What received payloads are allocated from: a run receives the same sizes as the last, so
  // the blocks it freed serve the next (a fresh large one is page-faulted anew).
  const std::shared_ptr<AccountingAllocator> receive_allocator_ =
      std::make_shared<AccountingAllocator>();
  // Direct payloads' receives, by slot: posted ahead by the first local device that arrives at
  // the collective (ExpectDirect), or by the receiving thread when the envelope comes first; the
  // receiving thread takes them, leaving a tombstone until the run ends so that a device arriving
  // later does not post the receive again. One whose send never comes (a mismatched program)
  // stays posted (Gloo would write into it) until its peer is gone or the group ends.
  struct Direct {
    int peer = 0;
    uint64_t run_set = 0;
    uint64_t run_index = 0;
    ir::Tensor x;
    std::unique_ptr<Buffer> buffer;  // null once taken
  };
  std::mutex direct_mu_;
  std::map<uint64_t, Direct> direct_;  // under direct_mu_

  std::mutex mu_;  // everything below
  std::condition_variable cv_;
  std::map<int, PeerState> peer_state_;
  std::vector<RunLink*> active_;
  std::map<uint64_t, uint64_t> begun_;  // runs begun, per set of processes
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<int, Message>>> early_;
  int64_t outstanding_ = 0;  // messages posted and not yet completed
  uint64_t next_exchange_ = 0;
  std::map<uint64_t, std::vector<std::pair<int, Message>>> exchanges_;
  // Remote collectives: their ops (stable addresses) and a plan per mesh resolving them.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ir::Op>> remote_ops_;
  std::map<std::string, std::unique_ptr<CollectivePlan>> remote_plans_;
  std::map<std::string, std::string> agreed_;  // AgreeOn's results by key
};

}  // namespace shardjit::runtime::distributed

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_GLOO_GROUP_INTERNAL_H_
