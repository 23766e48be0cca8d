#include "runtime/distributed/gloo_process_group.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"
#include "runtime/distributed/gloo_group_internal.h"

namespace shardjit::runtime::distributed {

// ----- RunLink -----

RunLink::~RunLink() { group_.EndRun(this); }

bool RunLink::IsLocal(int64_t position) const {
  return process_of_[position] == group_.process_id();
}

namespace {

// Elements `range` of `x`, as a tensor of their own.
ir::Tensor Elements(const ir::Tensor& x, const ElementRange& range) {
  return x.Subrange(range.begin, ir::ShapedType{x.dtype(), {range.size()}});
}

}  // namespace

void RunLink::PostArrival(int64_t seq, int64_t position, const ResolvedCollective& resolved,
                          const std::vector<ir::Tensor>& operands,
                          const std::vector<int>& processes, const std::vector<bool>& with_data,
                          const std::vector<ElementRange>& shares) {
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
    // A split all-reduce's single operand: only the receiver's share.
    if (!shares.empty() && with_data[i]) {
      m.offsets = {{shares[i].begin, shares[i].end}};
      m.payloads[0] = Elements(operands[0], shares[i]);
    }
    group_.Post(processes[i], std::move(m));
  }
}

void RunLink::PostReduced(int64_t seq, int64_t key, const ir::Tensor& out,
                          const ElementRange& piece, const std::vector<int>& processes) {
  for (int process : processes) {
    Message m = Start(MessageKind::kReduced);
    m.header.seq = seq;
    m.header.position = key;
    m.types = {out.type()};
    m.sent = {true};
    m.offsets = {{piece.begin, piece.end}};
    m.payloads = {Elements(out, piece)};
    group_.Post(process, std::move(m));
  }
}

void RunLink::ExpectReduced(int64_t seq, int64_t key, int process, const ir::Tensor& out,
                            const ElementRange& piece) {
  if (!PayloadsDirect(MessageKind::kReduced, piece.size() * ir::DTypeSize(out.dtype()))) return;
  group_.ExpectDirect(
      process, set_, index_,
      DirectSlot(set_, index_, seq, key, kReducedIndex, out.type(), {piece.begin, piece.end}),
      out.type(), {piece.begin, piece.end}, out);
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

// A kernel op travels as: header position/target (source and target), seq (the instance);
// offsets[0] = {sem_param, sem_index, amount, param, to_offset}, offsets[1] = to_strides; for a
// copy, types = {dst_type, the window's type} with the window's elements as the one payload.
void RunLink::PostKernelOp(const RemoteKernelOp& op) {
  Message m = Start(MessageKind::kKernel);
  m.header.position = op.source;
  m.header.target = op.target;
  m.header.seq = op.instance;
  m.offsets = {{op.sem_param, op.sem_index, op.amount, op.param, op.to_offset}, op.to_strides};
  if (op.data.defined()) {
    m.types = {op.dst_type, op.data.type()};
    m.sent = {false, true};
    m.payloads = {op.data};
  }
  group_.Post(ProcessOf(op.target), std::move(m));
}

void RunLink::ExpectOperands(int64_t seq, const std::vector<int64_t>& sources,
                             const std::vector<ir::ShapedType>& types,
                             const std::vector<ir::Tensor>& destinations,
                             const ElementRange& share) {
  // The elements of operand i that come: a split all-reduce's share, or all of them.
  auto elements = [&](size_t i) -> std::pair<int64_t, int64_t> {
    if (share.size() > 0) return {share.begin, share.end};
    return {0, types[i].num_elements()};
  };
  uint64_t bytes = 0;
  for (size_t i = 0; i < types.size(); ++i) {
    bytes += (elements(i).second - elements(i).first) * ir::DTypeSize(types[i].dtype);
  }
  if (!PayloadsDirect(MessageKind::kArrival, bytes)) return;
  for (size_t s = 0; s < sources.size(); ++s) {
    const int64_t source = sources[s];
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i].byte_size() == 0) continue;
      const bool in_place = i == 0 && s < destinations.size();
      group_.ExpectDirect(
          process_of_[source], set_, index_,
          DirectSlot(set_, index_, seq, source, static_cast<int>(i), types[i], elements(i)),
          types[i], elements(i), in_place ? destinations[s] : ir::Tensor());
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
      // A split all-reduce's: the share of its operand sent (checked against this process's).
      ElementRange share;
      if (!m.offsets.empty()) {
        if (m.types.size() != 1 || !m.sent[0]) return refuse("elements of an arrival not sent");
        const std::pair<int64_t, int64_t> elements = PayloadElements(m, 0).value();  // Open's
        share = {elements.first, elements.second};
      }
      run_.DeliverArrival(h.seq, h.position, *resolved, std::move(operands), std::move(m.types),
                          share);
      return;
    }
    case MessageKind::kReduced: {
      if (h.seq < 0 || h.position < 0 || h.position >= n || m.payloads.size() != 1 ||
          m.offsets.size() != 1 || m.offsets[0].size() != 2) {
        return refuse(fmt::format("an all-reduce result piece of collective #{}", h.seq));
      }
      run_.DeliverReduced(peer, h.seq, h.position, {m.offsets[0][0], m.offsets[0][1]},
                          m.payloads[0]);
      return;
    }
    case MessageKind::kMail:
      if (h.position < 0 || h.position >= n || process_of_[h.position] != peer ||
          h.target < 0 || h.target >= n || !IsLocal(h.target) || m.payloads.size() != 1) {
        return refuse(fmt::format("a psend from mesh position {} to {}", h.position, h.target));
      }
      run_.DeliverMail(h.position, h.target, std::move(m.payloads[0]));
      return;
    case MessageKind::kKernel: {
      const bool copy = m.payloads.size() == 1 && m.types.size() == 2;
      if (h.position < 0 || h.position >= n || process_of_[h.position] != peer ||
          h.target < 0 || h.target >= n || !IsLocal(h.target) || h.seq < 1 ||
          m.offsets.size() != 2 || m.offsets[0].size() != 5 ||
          (!copy && (!m.payloads.empty() || !m.types.empty())) ||
          (copy && (m.offsets[1].size() != m.types[1].dims.size() ||
                    m.types[0].dtype != m.types[1].dtype))) {
        return refuse(fmt::format("a kernel op from mesh position {} to {}", h.position,
                                  h.target));
      }
      RemoteKernelOp op;
      op.source = h.position;
      op.target = h.target;
      op.instance = h.seq;
      op.sem_param = static_cast<int>(m.offsets[0][0]);
      op.sem_index = m.offsets[0][1];
      op.amount = m.offsets[0][2];
      op.param = static_cast<int>(m.offsets[0][3]);
      op.to_offset = m.offsets[0][4];
      op.to_strides = m.offsets[1];
      if (copy) {
        op.dst_type = m.types[0];
        op.data = std::move(m.payloads[0]);
      }
      run_.DeliverKernelOp(std::move(op));
      return;
    }
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
  std::vector<int> late;
  CompleteAllSends(deadline, late);
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
  std::vector<int> late;
  if (CompleteAllSends(
          std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(options_.timeout),
          late)) {
    return absl::OkStatus();
  }
  std::lock_guard<std::mutex> lock(mu_);
  return absl::DeadlineExceededError(
      fmt::format("process {}: {} messages to processes [{}] were not taken within {}",
                  options_.rank, outstanding_, absl::StrJoin(late, ","),
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
  lock.unlock();
  // What this process posted: completed now, not at the next run's end (it keeps its blocks).
  RETURN_IF_ERROR(Flush());
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

namespace {

// A Gloo TCP device whose loop thread (started by the device, inheriting its creator's policy)
// is SCHED_BATCH: it never preempts a running thread when it wakes. Gloo's loop polls a pair only
// if it gets the pair's lock at once, and polls again immediately otherwise; a loop thread woken
// by a peer's message that preempted the thread holding that lock (one posting a send or a
// receive) would leave the other loop threads polling in vain until the next scheduler tick.
std::shared_ptr<gloo::transport::Device> CreateBatchDevice(const gloo::transport::tcp::attr& attr) {
  std::shared_ptr<gloo::transport::Device> device;
  std::exception_ptr failed;
  std::thread creator([&] {
    sched_param param{};
    sched_setscheduler(0, SCHED_BATCH, &param);  // best effort: a normal thread works too
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (...) {
      failed = std::current_exception();
    }
  });
  creator.join();
  if (failed) std::rethrow_exception(failed);
  return device;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> ConnectGloo(
    const GlooOptions& options, std::shared_ptr<gloo::rendezvous::Store> store,
    std::shared_ptr<void> keep_alive) {
  std::array<std::shared_ptr<gloo::rendezvous::Context>, 2> contexts;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    for (int i = 0; i < 2; ++i) {
      contexts[i] = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
      contexts[i]->setTimeout(absl::ToChronoMilliseconds(options.timeout));
      gloo::rendezvous::PrefixStore prefix(i == 0 ? "shardjit/gloo/up" : "shardjit/gloo/down",
                                           *store);
      std::shared_ptr<gloo::transport::Device> device = CreateBatchDevice(attr);
      contexts[i]->connectFullMesh(prefix, device);
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(fmt::format(
        "process {} of {}: connecting to the other processes (listening on {}) failed: {}",
        options.rank, options.size, options.hostname, e.what()));
  }
  return std::shared_ptr<ProcessGroup>(
      new GlooProcessGroup(options, std::move(store), std::move(keep_alive), std::move(contexts)));
}

}  // namespace shardjit::runtime::distributed
