#include "runtime/distributed/gloo_process_group.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "ir/sharding.h"
#include "runtime/collective_plan.h"
#include "runtime/device.h"
#include "runtime/distributed/wire.h"
#include "runtime/fabric.h"

namespace shardjit::runtime::distributed {
namespace {

using Buffer = gloo::transport::UnboundBuffer;

// Between two processes, envelopes travel in order on one Gloo slot and what did not fit in them
// (wire.h) in order on another.
constexpr uint64_t kEnvelopeSlot = 0x534a;
constexpr uint64_t kSpillSlot = 0x534b;
// Waits that only an abort or a peer's failure may end.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365);

// A message posted to a peer: what it sends from stays alive until the peer has taken it.
struct Outgoing {
  std::vector<char> envelope;
  std::vector<char> meta;  // when it does not fit in the envelope
  std::vector<ir::Tensor> keep;
  std::vector<std::unique_ptr<Buffer>> buffers;  // the envelope's first
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
                   const std::vector<bool>& with_data) override;
  void ExpectOperands(int64_t seq, const std::vector<int64_t>& sources,
                      const std::vector<ir::ShapedType>& types) override;
  void PostMail(int64_t source, int64_t target, const ir::Tensor& x) override;
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
  GlooProcessGroup(const GlooOptions& options, std::shared_ptr<gloo::rendezvous::Store> store,
                   std::shared_ptr<void> keep_alive,
                   std::shared_ptr<gloo::rendezvous::Context> context)
      : options_(options),
        store_(std::move(store)),
        keep_alive_(std::move(keep_alive)),
        context_(std::move(context)),
        peers_(options.size) {
    for (int p = 0; p < options_.size; ++p) {
      if (p == options_.rank) continue;
      peers_[p].receiver = std::thread([this, p] { Receive(p); });
      peers_[p].sender = std::thread([this, p] { CompleteSends(p); });
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
  // Posts the receive of a direct payload from `peer` on `slot` into a tensor of `type`, unless
  // it is posted or taken already.
  void ExpectDirect(int peer, uint64_t run_set, uint64_t run_index, uint64_t slot,
                    const ir::ShapedType& type);
  // The resolution over `mesh` of a collective another process sent the signature of.
  absl::StatusOr<const ResolvedCollective*> RemoteResolved(const ir::Mesh& mesh,
                                                           const std::string& signature);
  void EndRun(RunLink* link);

 private:
  struct Peer {
    std::mutex mu;  // the fields below
    std::condition_variable cv;
    std::deque<std::unique_ptr<Outgoing>> outgoing;  // posted, not yet taken by the peer
    Buffer* receiving = nullptr;                      // the buffer the receiver waits on
    Buffer* sending = nullptr;                        // the buffer the sender thread waits on
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
  // Receives the direct payload on `slot` (posted ahead, or now) into `x`; false when stopped.
  bool ReceiveDirect(int peer, const Header& h, uint64_t slot, const ir::ShapedType& type,
                     ir::Tensor& x);
  // Drops the receives posted ahead that will never be taken: those of `peer` (gone, when
  // >= 0), and the tombstones of run (`run_set`, `run_index`) once it has ended.
  void DropDirect(int peer, uint64_t run_set, uint64_t run_index);
  // The message of a received envelope (and what follows it).
  absl::StatusOr<Message> Open(int peer, const std::vector<char>& envelope);
  void Deliver(int peer, Message m);
  void CompleteSends(int peer);
  void MarkFailed(int peer, const std::string& reason);
  // Whether `peer` failed or left: it takes nothing more.
  bool PeerEnded(int peer) {
    std::lock_guard<std::mutex> lock(mu_);
    const PeerState& s = peer_state_[peer];
    return s.failed || s.left;
  }
  // Ends the sender thread's wait for `peer` to take a message (it failed or left).
  void AbortSends(int peer) {
    std::lock_guard<std::mutex> lock(peers_[peer].mu);
    if (peers_[peer].sending != nullptr) peers_[peer].sending->abortWaitSend();
  }
  // The error a run gets for a peer that is gone; under mu_.
  absl::Status PeerGone(int peer, const RunLink& link) const;

  const GlooOptions options_;
  const std::shared_ptr<gloo::rendezvous::Store> store_;
  const std::shared_ptr<void> keep_alive_;
  const std::shared_ptr<gloo::rendezvous::Context> context_;
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
  int64_t outstanding_ = 0;  // messages posted and not yet taken
  uint64_t next_exchange_ = 0;
  std::map<uint64_t, std::vector<std::pair<int, Message>>> exchanges_;
  // Remote collectives: their ops (stable addresses) and a plan per mesh resolving them.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<ir::Op>> remote_ops_;
  std::map<std::string, std::unique_ptr<CollectivePlan>> remote_plans_;
  std::map<std::string, std::string> agreed_;  // AgreeOn's results by key
};

// ----- RunLink -----

RunLink::~RunLink() { group_.EndRun(this); }

bool RunLink::IsLocal(int64_t position) const {
  return process_of_[position] == group_.process_id();
}

void RunLink::PostArrival(int64_t seq, int64_t position, const ResolvedCollective& resolved,
                          const std::vector<ir::Tensor>& operands,
                          const std::vector<int>& processes, const std::vector<bool>& with_data) {
  for (size_t i = 0; i < processes.size(); ++i) {
    Message m = Start(MessageKind::kArrival);
    m.header.seq = seq;
    m.header.position = position;
    m.signature = resolved.signature;
    for (const ir::Tensor& x : operands) {
      m.types.push_back(x.type());
      m.sent.push_back(with_data[i]);
      if (with_data[i]) m.payloads.push_back(x);
    }
    group_.Post(processes[i], std::move(m));
  }
}

void RunLink::PostMail(int64_t source, int64_t target, const ir::Tensor& x) {
  Message m = Start(MessageKind::kMail);
  m.header.position = source;
  m.header.target = target;
  m.types = {x.type()};
  m.sent = {true};
  m.payloads = {x};
  group_.Post(ProcessOf(target), std::move(m));
}

void RunLink::ExpectOperands(int64_t seq, const std::vector<int64_t>& sources,
                             const std::vector<ir::ShapedType>& types) {
  uint64_t bytes = 0;
  for (const ir::ShapedType& t : types) bytes += t.byte_size();
  if (!PayloadsDirect(MessageKind::kArrival, bytes)) return;
  for (int64_t source : sources) {
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i].byte_size() == 0) continue;
      group_.ExpectDirect(process_of_[source], set_, index_,
                          DirectSlot(set_, index_, seq, source, static_cast<int>(i), types[i]),
                          types[i]);
    }
  }
}

void RunLink::PostFailure(const absl::Status& status) {
  for (Message& m : FailureMessages(status)) {
    group_.Post(static_cast<int>(m.header.target), std::move(m));
  }
}

std::vector<Message> RunLink::FailureMessages(const absl::Status& status) const {
  std::vector<Message> out;
  for (int process : processes_) {
    if (process == group_.process_id()) continue;
    Message m = Start(MessageKind::kFailure);
    m.header.target = process;  // the receiving process
    m.header.status_code = static_cast<uint32_t>(status.code());
    m.text = std::string(status.message());
    out.push_back(std::move(m));
  }
  return out;
}

void RunLink::Deliver(int peer, Message& m) {
  const Header& h = m.header;
  const int64_t n = static_cast<int64_t>(process_of_.size());
  auto refuse = [&](const std::string& what) {
    run_.CancelFromPeer(absl::DataLossError(
        fmt::format("process {} sent a message this run cannot take: {}", peer, what)));
  };
  switch (static_cast<MessageKind>(h.kind)) {
    case MessageKind::kFailure: {
      const auto code = static_cast<absl::StatusCode>(h.status_code);
      run_.CancelFromPeer(absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown
                                                                     : code,
                                       m.text));
      return;
    }
    case MessageKind::kArrival: {
      if (h.position < 0 || h.position >= n || process_of_[h.position] != peer || h.seq < 0) {
        return refuse(fmt::format("an arrival of mesh position {} (collective #{})", h.position,
                                  h.seq));
      }
      absl::StatusOr<const ResolvedCollective*> resolved =
          group_.RemoteResolved(mesh_, m.signature);
      if (!resolved.ok()) return refuse(std::string(resolved.status().message()));
      std::vector<ir::Tensor> operands(m.types.size());
      size_t next = 0;
      for (size_t i = 0; i < m.types.size(); ++i) {
        if (m.sent[i]) operands[i] = std::move(m.payloads[next++]);
      }
      run_.DeliverArrival(h.seq, h.position, *resolved, std::move(operands), std::move(m.types));
      return;
    }
    case MessageKind::kMail:
      if (h.position < 0 || h.position >= n || process_of_[h.position] != peer ||
          h.target < 0 || h.target >= n || !IsLocal(h.target) || m.payloads.size() != 1) {
        return refuse(fmt::format("a psend from mesh position {} to {}", h.position, h.target));
      }
      run_.DeliverMail(h.position, h.target, std::move(m.payloads[0]));
      return;
    default:
      return refuse(fmt::format("message kind {}", h.kind));
  }
}

// ----- GlooProcessGroup -----

GlooProcessGroup::~GlooProcessGroup() {
  // Goodbye to every peer still there, after everything posted before it.
  for (int p = 0; p < options_.size; ++p) {
    if (p == options_.rank) continue;
    Message bye;
    bye.header.kind = static_cast<uint32_t>(MessageKind::kBye);
    Post(p, std::move(bye));
  }
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(options_.timeout);
  {
    // Wait for every peer's goodbye (or failure), and for ours to be taken.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] {
      if (outstanding_ > 0) return false;
      for (int p = 0; p < options_.size; ++p) {
        if (p == options_.rank) continue;
        const PeerState& s = peer_state_[p];
        if (!s.failed && !s.left) return false;
      }
      return true;
    });
  }
  for (int p = 0; p < options_.size; ++p) {
    if (p == options_.rank) continue;
    Peer& peer = peers_[p];
    {
      std::lock_guard<std::mutex> lock(peer.mu);
      peer.stop = true;
      if (peer.receiving != nullptr) peer.receiving->abortWaitRecv();
      if (peer.sending != nullptr) peer.sending->abortWaitSend();
    }
    peer.cv.notify_all();
  }
  for (int p = 0; p < options_.size; ++p) {
    if (p == options_.rank) continue;
    peers_[p].receiver.join();
    peers_[p].sender.join();
  }
}

void GlooProcessGroup::Post(int peer, Message m) {
  auto out = std::make_unique<Outgoing>();
  std::vector<char> meta = EncodeMeta(m);
  Header header = m.header;
  header.meta_bytes = meta.size();
  header.num_payloads = static_cast<uint32_t>(m.payloads.size());
  uint64_t payload_bytes = 0;
  for (const ir::Tensor& x : m.payloads) payload_bytes += x.byte_size();
  const bool direct = PayloadsDirect(static_cast<MessageKind>(header.kind), payload_bytes);
  const EnvelopeLayout layout = LayOutEnvelope(meta.size(), direct ? 0 : payload_bytes);
  out->envelope.resize(layout.bytes);
  char* at = out->envelope.data();
  std::memcpy(at, &header, sizeof(Header));
  at += sizeof(Header);
  if (layout.meta_inline) {
    std::memcpy(at, meta.data(), meta.size());
    at += meta.size();
  } else {
    out->meta = std::move(meta);
  }
  if (layout.payloads_inline && !direct) {
    for (const ir::Tensor& x : m.payloads) {
      if (x.byte_size() > 0) std::memcpy(at, x.data(), x.byte_size());
      at += x.byte_size();
    }
    m.payloads.clear();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const PeerState& s = peer_state_[peer];
    if (s.failed || s.left) return;
    ++outstanding_;
  }
  Peer& p = peers_[peer];
  std::lock_guard<std::mutex> lock(p.mu);
  // Posted under the peer's lock: one message's parts are never interleaved with another's.
  try {
    out->buffers.push_back(
        context_->createUnboundBuffer(out->envelope.data(), out->envelope.size()));
    if (!out->meta.empty()) {
      out->buffers.push_back(context_->createUnboundBuffer(out->meta.data(), out->meta.size()));
    }
    std::vector<uint64_t> slots(out->buffers.size(), kSpillSlot);
    slots[0] = kEnvelopeSlot;
    for (size_t i = 0; i < m.payloads.size(); ++i) {
      ir::Tensor& x = m.payloads[i];
      if (x.byte_size() == 0) continue;
      out->buffers.push_back(
          context_->createUnboundBuffer(const_cast<void*>(x.data()), x.byte_size()));
      slots.push_back(direct ? DirectSlot(header.run_set, header.run_index, header.seq,
                                          header.position, static_cast<int>(i), x.type())
                             : kSpillSlot);
      out->keep.push_back(std::move(x));
    }
    for (size_t i = 0; i < out->buffers.size(); ++i) out->buffers[i]->send(peer, slots[i]);
  } catch (const std::exception& e) {
    // The pair failed: the sender thread drops what was posted before; this one is not posted.
    out->buffers.clear();
  }
  p.outgoing.push_back(std::move(out));
  p.cv.notify_all();
}

void GlooProcessGroup::CompleteSends(int peer) {
  Peer& p = peers_[peer];
  for (;;) {
    std::unique_ptr<Outgoing> out;
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.cv.wait(lock, [&] { return p.stop || !p.outgoing.empty(); });
      if (p.outgoing.empty()) return;
      out = std::move(p.outgoing.front());
      p.outgoing.pop_front();
    }
    for (std::unique_ptr<Buffer>& b : out->buffers) {
      if (PeerEnded(peer)) break;  // it takes nothing more: drop the rest
      {
        std::lock_guard<std::mutex> lock(p.mu);
        if (p.stop) break;
        p.sending = b.get();
      }
      bool sent = false;
      std::string error = "send aborted";
      try {
        sent = b->waitSend(nullptr, kForever);
      } catch (const std::exception& e) {
        error = e.what();
      }
      {
        std::lock_guard<std::mutex> lock(p.mu);
        p.sending = nullptr;
      }
      if (!sent) {
        if (!PeerEnded(peer)) MarkFailed(peer, error);
        break;
      }
    }
    out.reset();  // releases the tensors sent from
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    cv_.notify_all();
  }
}

bool GlooProcessGroup::Await(int peer, Buffer& buffer) {
  Peer& p = peers_[peer];
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.stop) return false;
    p.receiving = &buffer;
  }
  bool received = false;
  try {
    received = buffer.waitRecv(nullptr, kForever);
  } catch (...) {
    std::lock_guard<std::mutex> lock(p.mu);
    p.receiving = nullptr;
    throw;
  }
  std::lock_guard<std::mutex> lock(p.mu);
  p.receiving = nullptr;
  return received;
}

bool GlooProcessGroup::ReceiveSpilled(int peer, void* data, size_t bytes) {
  std::unique_ptr<Buffer> buffer = context_->createUnboundBuffer(data, bytes);
  buffer->recv(peer, kSpillSlot);  // throws at once if the pair has failed
  return Await(peer, *buffer);
}

void GlooProcessGroup::ExpectDirect(int peer, uint64_t run_set, uint64_t run_index,
                                    uint64_t slot, const ir::ShapedType& type) {
  if (PeerEnded(peer)) return;  // it sends nothing more
  std::lock_guard<std::mutex> lock(direct_mu_);
  if (direct_.count(slot) > 0) return;  // posted or taken already
  Direct d{peer, run_set, run_index, ir::Tensor::Empty(type, receive_allocator_.get()), nullptr};
  d.buffer = context_->createUnboundBuffer(d.x.data(), d.x.byte_size());
  try {
    d.buffer->recv(peer, slot);
  } catch (const std::exception& e) {
    return;  // the pair failed: the receiving thread fails the runs
  }
  direct_.emplace(slot, std::move(d));
}

bool GlooProcessGroup::ReceiveDirect(int peer, const Header& h, uint64_t slot,
                                     const ir::ShapedType& type, ir::Tensor& x) {
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard<std::mutex> lock(direct_mu_);
    auto it = direct_.find(slot);
    if (it != direct_.end() && it->second.buffer != nullptr) {
      x = std::move(it->second.x);
      buffer = std::move(it->second.buffer);
    } else {
      x = ir::Tensor::Empty(type, receive_allocator_.get());
      buffer = context_->createUnboundBuffer(x.data(), x.byte_size());
      buffer->recv(peer, slot);  // throws at once if the pair has failed
      direct_[slot] = Direct{peer, h.run_set, h.run_index, ir::Tensor(), nullptr};
    }
  }
  return Await(peer, *buffer);
}

void GlooProcessGroup::DropDirect(int peer, uint64_t run_set, uint64_t run_index) {
  std::vector<Direct> dropped;  // destroyed without the lock
  std::lock_guard<std::mutex> lock(direct_mu_);
  for (auto it = direct_.begin(); it != direct_.end();) {
    const Direct& d = it->second;
    const bool gone = d.peer == peer;
    const bool ended = d.buffer == nullptr && d.run_set == run_set && d.run_index == run_index;
    if (gone || ended) {
      dropped.push_back(std::move(it->second));
      it = direct_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<Message> GlooProcessGroup::Open(int peer, const std::vector<char>& envelope) {
  Message m;
  std::memcpy(&m.header, envelope.data(), sizeof(Header));
  const Header& h = m.header;
  if (h.magic != kWireMagic || h.meta_bytes > kMaxMetaBytes || h.num_payloads > kMaxPayloads) {
    return absl::DataLossError(fmt::format(
        "malformed header (magic {:#x}, {} metadata bytes, {} payloads)", h.magic, h.meta_bytes,
        h.num_payloads));
  }
  const char* at = envelope.data() + sizeof(Header);
  if (h.meta_bytes > 0) {
    std::vector<char> meta(h.meta_bytes);
    if (LayOutEnvelope(h.meta_bytes, 0).meta_inline) {
      std::memcpy(meta.data(), at, meta.size());
      at += meta.size();
    } else if (!ReceiveSpilled(peer, meta.data(), meta.size())) {
      return absl::CancelledError("stopped");
    }
    if (absl::Status s = DecodeMeta(meta, m); !s.ok()) return s;
  } else if (h.num_payloads != 0) {
    return absl::DataLossError("payloads without metadata");
  }
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < m.types.size(); ++i) {
    if (m.sent[i]) payload_bytes += m.types[i].byte_size();
  }
  const bool direct = PayloadsDirect(static_cast<MessageKind>(h.kind), payload_bytes);
  const bool inline_payloads =
      !direct && LayOutEnvelope(h.meta_bytes, payload_bytes).payloads_inline;
  for (size_t i = 0; i < m.types.size(); ++i) {
    if (!m.sent[i]) continue;
    if (direct && m.types[i].byte_size() > 0) {
      ir::Tensor x;
      const int index = static_cast<int>(m.payloads.size());
      if (!ReceiveDirect(peer, h,
                         DirectSlot(h.run_set, h.run_index, h.seq, h.position, index, m.types[i]),
                         m.types[i], x)) {
        return absl::CancelledError("stopped");
      }
      m.payloads.push_back(std::move(x));
      continue;
    }
    ir::Tensor x = ir::Tensor::Empty(m.types[i], receive_allocator_.get());
    if (x.byte_size() > 0) {
      if (inline_payloads) {
        std::memcpy(x.data(), at, x.byte_size());
        at += x.byte_size();
      } else if (!ReceiveSpilled(peer, x.data(), x.byte_size())) {
        return absl::CancelledError("stopped");
      }
    }
    m.payloads.push_back(std::move(x));
  }
  return m;
}

void GlooProcessGroup::Receive(int peer) {
  // Two envelopes: the next one is posted before the last one is opened, so that the peer's
  // next message leaves at once.
  std::vector<char> envelopes[2] = {std::vector<char>(kEnvelopeBytes),
                                    std::vector<char>(kEnvelopeBytes)};
  std::unique_ptr<Buffer> buffers[2];
  try {
    for (int i = 0; i < 2; ++i) {
      buffers[i] = context_->createUnboundBuffer(envelopes[i].data(), kEnvelopeBytes);
    }
    buffers[0]->recv(peer, kEnvelopeSlot);
  } catch (const std::exception& e) {
    MarkFailed(peer, e.what());
    return;
  }
  for (int next = 0;; next ^= 1) {
    absl::StatusOr<Message> m;
    try {
      if (!Await(peer, *buffers[next])) return;  // stopped
      buffers[next ^ 1]->recv(peer, kEnvelopeSlot);
      m = Open(peer, envelopes[next]);
    } catch (const std::exception& e) {
      MarkFailed(peer, e.what());
      return;
    }
    if (!m.ok()) {
      if (!absl::IsCancelled(m.status())) MarkFailed(peer, m.status().ToString());
      return;
    }
    if (static_cast<MessageKind>(m->header.kind) == MessageKind::kBye) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        peer_state_[peer].left = true;
        AbortSends(peer);
        // Everything it sent came before: what a run still waits for from it never comes.
        for (RunLink* link : active_) {
          if (link->Involves(peer)) link->MarkGone(peer, PeerGone(peer, *link));
        }
        cv_.notify_all();
      }
      DropDirect(peer, 0, 0);
      return;
    }
    Deliver(peer, std::move(*m));
  }
}

void GlooProcessGroup::Deliver(int peer, Message m) {
  std::lock_guard<std::mutex> lock(mu_);
  const Header& h = m.header;
  if (static_cast<MessageKind>(h.kind) == MessageKind::kBlocks) {
    exchanges_[h.run_index].emplace_back(peer, std::move(m));
    cv_.notify_all();
    return;
  }
  for (RunLink* link : active_) {
    if (link->set() == h.run_set && link->index() == h.run_index) {
      link->Deliver(peer, m);
      return;
    }
  }
  // A run not begun here yet: kept until it is. One that has ended: dropped.
  if (h.run_index >= begun_[h.run_set]) {
    early_[{h.run_set, h.run_index}].emplace_back(peer, std::move(m));
  }
}

void GlooProcessGroup::MarkFailed(int peer, const std::string& reason) {
  std::vector<Message> tell;  // the failure, for the runs' other processes
  {
    std::lock_guard<std::mutex> lock(mu_);
    PeerState& s = peer_state_[peer];
    if (s.failed || s.left) return;
    s.failed = true;
    s.reason = reason;
    AbortSends(peer);
    for (RunLink* link : active_) {
      if (!link->Involves(peer)) continue;
      const absl::Status status = PeerGone(peer, *link);
      link->run().CancelFromPeer(status);
      for (Message& m : link->FailureMessages(status)) tell.push_back(std::move(m));
    }
    cv_.notify_all();
  }
  // Found here: told to the others too, who may not have seen it yet (posted without mu_).
  for (Message& m : tell) Post(static_cast<int>(m.header.target), std::move(m));
  DropDirect(peer, 0, 0);  // its connection is down: nothing more is written into them
}

absl::Status GlooProcessGroup::PeerGone(int peer, const RunLink& link) const {
  const PeerState& s = peer_state_.at(peer);
  if (s.failed) {
    return absl::UnavailableError(fmt::format("process {} (devices {}) failed: {}", peer,
                                              link.DevicesOf(peer), s.reason));
  }
  return absl::FailedPreconditionError(fmt::format(
      "process {} (devices {}) has left the job without taking part in this run", peer,
      link.DevicesOf(peer)));
}

std::unique_ptr<RemotePeers> GlooProcessGroup::BeginRun(const ir::Mesh& mesh,
                                                        const std::vector<int>& process_of,
                                                        RunState& run) {
  std::vector<int> processes = process_of;
  std::sort(processes.begin(), processes.end());
  processes.erase(std::unique(processes.begin(), processes.end()), processes.end());
  const uint64_t set = RunSetKey(processes);
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t index = begun_[set]++;
  auto link = std::make_unique<RunLink>(*this, set, index, mesh, process_of, processes, run);
  run.SetRemote(link.get());
  active_.push_back(link.get());
  absl::Status failed;
  for (int p : processes) {
    if (p == options_.rank) continue;
    const PeerState& s = peer_state_[p];
    if (s.failed && failed.ok()) failed = PeerGone(p, *link);
    if (s.left) link->MarkGone(p, PeerGone(p, *link));
  }
  for (auto it = early_.begin(); it != early_.end();) {
    if (it->first.first != set || it->first.second > index) {
      ++it;
      continue;
    }
    if (it->first.second == index) {
      for (auto& [peer, m] : it->second) link->Deliver(peer, m);
    }
    it = early_.erase(it);  // this run's, or an older run's that never began here
  }
  lock.unlock();
  if (!failed.ok()) run.Cancel(failed);  // posts it: without mu_
  return link;
}

void GlooProcessGroup::EndRun(RunLink* link) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(std::find(active_.begin(), active_.end(), link));
  }
  DropDirect(/*peer=*/-1, link->set(), link->index());
}

absl::Status GlooProcessGroup::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.timeout),
                                 [&] { return outstanding_ == 0; });
  if (done) return absl::OkStatus();
  std::vector<int> waiting;
  for (int p = 0; p < options_.size; ++p) {
    if (p == options_.rank) continue;
    std::lock_guard<std::mutex> peer_lock(peers_[p].mu);
    if (!peers_[p].outgoing.empty() || peers_[p].sending != nullptr) waiting.push_back(p);
  }
  return absl::DeadlineExceededError(
      fmt::format("process {}: {} messages to processes [{}] were not taken within {}",
                  options_.rank, outstanding_, absl::StrJoin(waiting, ","),
                  absl::FormatDuration(options_.timeout)));
}

absl::StatusOr<std::vector<ProcessGroup::Block>> GlooProcessGroup::ExchangeBlocks(
    const std::vector<Block>& blocks) {
  uint64_t index = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = next_exchange_++;
  }
  for (int p = 0; p < options_.size; ++p) {
    if (p == options_.rank) continue;
    Message m;
    m.header.kind = static_cast<uint32_t>(MessageKind::kBlocks);
    m.header.run_index = index;
    m.header.position = options_.rank;
    for (const Block& b : blocks) {
      m.types.push_back(b.data.type());
      m.sent.push_back(true);
      m.offsets.push_back(b.offset);
      m.payloads.push_back(b.data);
    }
    Post(p, std::move(m));
  }
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::pair<int, Message>>& got = exchanges_[index];
  auto gone = [&] {
    for (int p = 0; p < options_.size; ++p) {
      if (p == options_.rank) continue;
      const bool sent = std::any_of(got.begin(), got.end(), [&](const auto& e) {
        return e.first == p;
      });
      const PeerState& s = peer_state_[p];
      if (!sent && (s.failed || s.left)) return true;
    }
    return false;
  };
  const size_t expected = static_cast<size_t>(options_.size - 1);
  cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.timeout),
               [&] { return got.size() == expected || gone(); });
  if (got.size() != expected) {
    std::vector<int> missing;
    for (int p = 0; p < options_.size; ++p) {
      if (p == options_.rank) continue;
      if (std::none_of(got.begin(), got.end(), [&](const auto& e) { return e.first == p; })) {
        missing.push_back(p);
      }
    }
    exchanges_.erase(index);
    return absl::DeadlineExceededError(fmt::format(
        "exchange #{} of host blocks: processes [{}] sent nothing within {}", index,
        absl::StrJoin(missing, ","), absl::FormatDuration(options_.timeout)));
  }
  std::vector<Block> out;
  for (auto& [peer, m] : got) {
    if (m.offsets.size() != m.payloads.size()) {
      return absl::DataLossError(fmt::format("process {} sent blocks without offsets", peer));
    }
    for (size_t i = 0; i < m.payloads.size(); ++i) {
      out.push_back({m.offsets[i], std::move(m.payloads[i])});
    }
  }
  exchanges_.erase(index);
  return out;
}

absl::StatusOr<std::string> GlooProcessGroup::AgreeOn(const std::string& key,
                                                      const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = agreed_.find(key); it != agreed_.end()) return it->second;
  }
  const std::string full = "shardjit/agree/" + key;
  std::string result = value;
  try {
    if (options_.rank == 0) {
      store_->set(full, std::vector<char>(value.begin(), value.end()));
    } else {
      store_->wait({full}, absl::ToChronoMilliseconds(options_.timeout));
      std::vector<char> v = store_->get(full);
      result.assign(v.begin(), v.end());
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        fmt::format("agreeing on \"{}\" with process 0: {}", key, e.what()));
  }
  // Kept: a key is set once (Gloo's file store refuses to overwrite one).
  std::lock_guard<std::mutex> lock(mu_);
  agreed_.emplace(key, result);
  return result;
}

absl::StatusOr<const ResolvedCollective*> GlooProcessGroup::RemoteResolved(
    const ir::Mesh& mesh, const std::string& signature) {
  // Under mu_ (called from Deliver).
  const std::string mesh_key = mesh.SerializeAsString();
  std::unique_ptr<ir::Op>& op = remote_ops_[{mesh_key, signature}];
  if (op == nullptr) {
    auto parsed = std::make_unique<ir::Op>();
    if (!parsed->ParseFromString(signature)) {
      remote_ops_.erase({mesh_key, signature});
      return absl::DataLossError("a collective signature that does not parse");
    }
    op = std::move(parsed);
  }
  std::unique_ptr<CollectivePlan>& plan = remote_plans_[mesh_key];
  if (plan == nullptr) plan = std::make_unique<CollectivePlan>(mesh);
  return &plan->Resolve(*op);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> ConnectGloo(
    const GlooOptions& options, std::shared_ptr<gloo::rendezvous::Store> store,
    std::shared_ptr<void> keep_alive) {
  auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
    gloo::rendezvous::PrefixStore prefix("shardjit/gloo", *store);
    context->connectFullMesh(prefix, device);
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format(
        "process {} of {}: connecting to the other processes (listening on {}) failed: {}",
        options.rank, options.size, options.hostname, e.what()));
  }
  return std::shared_ptr<ProcessGroup>(
      new GlooProcessGroup(options, std::move(store), std::move(keep_alive), std::move(context)));
}

}  // namespace shardjit::runtime::distributed
