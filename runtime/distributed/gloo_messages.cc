// How messages travel between the processes of a GlooProcessGroup (gloo_group_internal.h):
// posting a message (its envelope, and what does not fit in it on the spill or its own slots),
// completing posted messages (waiting for the peer to take them: the run's own thread at its end,
// a sending thread per peer when many wait), and the receiving thread that opens envelopes and
// receives what follows them straight into tensors.
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status_macros.h"
#include "runtime/distributed/gloo_group_internal.h"

namespace shardjit::runtime::distributed {

void GlooProcessGroup::Post(int peer, Message m) {
  auto out = std::make_unique<Outgoing>();
  std::vector<char> meta = EncodeMeta(m);
  Header header = m.header;
  header.meta_bytes = meta.size();
  header.num_payloads = static_cast<uint32_t>(m.payloads.size());
  uint64_t payload_bytes = 0;
  for (const ir::Tensor& x : m.payloads) payload_bytes += x.byte_size();
  const bool direct = PayloadsDirect(static_cast<MessageKind>(header.kind), payload_bytes);
  std::vector<size_t> operand_of;  // payload i is operand operand_of[i]'s
  for (size_t i = 0; i < m.sent.size(); ++i) {
    if (m.sent[i]) operand_of.push_back(i);
  }
  const EnvelopeLayout layout = LayOutEnvelope(meta.size(), direct ? 0 : payload_bytes);
  out->envelope = std::make_unique_for_overwrite<char[]>(layout.bytes);
  out->envelope_bytes = layout.bytes;
  char* at = out->envelope.get();
  std::memcpy(at, &header, sizeof(Header));
  at += sizeof(Header);
  if (layout.meta_inline) {
    std::memcpy(at, meta.data(), meta.size());
    at += meta.size();
  } else {
    out->meta = std::move(meta);
  }
  if (layout.payloads_inline && !direct) {
    char* payloads = out->envelope.get() + layout.payload_offset;
    std::memset(at, 0, payloads - at);  // the padding before them
    at = payloads;
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
    gloo::rendezvous::Context& context = SendContext(peer);
    out->buffers.push_back(
        context.createUnboundBuffer(out->envelope.get(), out->envelope_bytes));
    if (!out->meta.empty()) {
      out->buffers.push_back(context.createUnboundBuffer(out->meta.data(), out->meta.size()));
    }
    std::vector<uint64_t> slots(out->buffers.size(), kSpillSlot);
    slots[0] = kEnvelopeSlot;
    for (size_t i = 0; i < m.payloads.size(); ++i) {
      ir::Tensor& x = m.payloads[i];
      if (x.byte_size() == 0) continue;
      out->buffers.push_back(
          context.createUnboundBuffer(const_cast<void*>(x.data()), x.byte_size()));
      if (direct) {
        const size_t operand = operand_of[i];
        const std::pair<int64_t, int64_t> elements = PayloadElements(m, operand).value();
        slots.push_back(DirectSlot(header.run_set, header.run_index, header.seq, header.position,
                                   static_cast<MessageKind>(header.kind) == MessageKind::kReduced
                                       ? kReducedIndex
                                       : static_cast<int>(i),
                                   m.types[operand], elements));
      } else {
        slots.push_back(kSpillSlot);
      }
      out->keep.push_back(std::move(x));
    }
    for (size_t i = 0; i < out->buffers.size(); ++i) out->buffers[i]->send(peer, slots[i]);
  } catch (const std::exception& e) {
    // The pair failed: what was posted before is dropped when completed; this is not posted.
    out->buffers.clear();
  }
  for (const ir::Tensor& x : out->keep) out->kept_bytes += x.byte_size();
  p.kept_bytes += out->kept_bytes;
  p.outgoing.push_back(std::move(out));
  // Completed at the end of the run unless too many wait: no thread is woken per message.
  if (TooManyPosted(p) && !p.completing) p.cv.notify_all();
}

GlooProcessGroup::Completion GlooProcessGroup::CompleteSends(
    int peer, std::chrono::steady_clock::time_point deadline) {
  Peer& p = peers_[peer];
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.completing) return Completion::kBusy;
    p.completing = true;
    p.deadline = deadline;
    p.late = false;
  }
  Completion result = Completion::kCompleted;
  for (;;) {
    std::unique_ptr<Outgoing> out;
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.outgoing.empty()) break;
      out = std::move(p.outgoing.front());
      p.outgoing.pop_front();
    }
    bool late = false;
    for (; out->taken < out->buffers.size(); ++out->taken) {
      Buffer& b = *out->buffers[out->taken];
      if (std::chrono::steady_clock::now() >= deadline) {  // put back, not waited for
        late = true;
        break;
      }
      {
        // Under mu_ then p.mu: a peer ending meanwhile finds `sending` and aborts the wait.
        std::lock_guard<std::mutex> lock(mu_);
        const PeerState& s = peer_state_[peer];
        if (s.failed || s.left) break;  // it takes nothing more: drop the rest
        std::lock_guard<std::mutex> peer_lock(p.mu);
        if (p.stop) break;
        p.sending = &b;
      }
      bool sent = false;
      bool threw = false;  // the pair failed: not a wait ended at the deadline
      std::string error = "send aborted";
      try {
        sent = b.waitSend(nullptr, kForever);
      } catch (const std::exception& e) {
        threw = true;
        error = e.what();
      }
      {
        std::lock_guard<std::mutex> lock(p.mu);
        p.sending = nullptr;
        late = !sent && !threw && p.late;
        p.late = false;
      }
      if (late) break;  // still in flight: completed later
      if (!sent) {
        if (!PeerEnded(peer)) MarkFailed(peer, error);
        break;
      }
    }
    if (late) {
      std::lock_guard<std::mutex> lock(p.mu);
      p.outgoing.push_front(std::move(out));
      result = Completion::kLate;
      break;
    }
    {
      std::lock_guard<std::mutex> lock(p.mu);
      p.kept_bytes -= out->kept_bytes;
    }
    out.reset();  // releases the tensors sent from
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.completing = false;
    if (TooManyPosted(p)) p.cv.notify_all();  // left behind at the deadline
  }
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();  // for CompleteAllSends, waiting while this thread completed them
  return result;
}

void GlooProcessGroup::ReapSends(int peer) {
  Peer& p = peers_[peer];
  std::unique_lock<std::mutex> lock(p.mu);
  for (;;) {
    p.cv.wait_for(lock, kDeadlineCheckPeriod,
                  [&] { return p.stop || (TooManyPosted(p) && !p.completing); });
    if (p.stop) return;
    if (p.completing) {
      // Another thread completes them: its wait ends at its deadline (the send stays posted).
      if (p.sending != nullptr && !p.late && std::chrono::steady_clock::now() >= p.deadline) {
        p.late = true;
        p.sending->abortWaitSend();
      }
      continue;
    }
    if (!TooManyPosted(p)) continue;
    lock.unlock();
    CompleteSends(peer, std::chrono::steady_clock::time_point::max());
    lock.lock();
  }
}

bool GlooProcessGroup::CompleteAllSends(std::chrono::steady_clock::time_point deadline,
                                        std::vector<int>& late) {
  // The peers whose messages another thread completes (or, with `queued`, that have messages
  // not completed); under mu_.
  auto peers_where = [&](bool queued) {
    std::vector<int> peers;
    for (int peer = 0; peer < options_.size; ++peer) {
      std::lock_guard<std::mutex> peer_lock(peers_[peer].mu);
      const Peer& p = peers_[peer];
      if (p.completing || (queued && !p.outgoing.empty())) peers.push_back(peer);
    }
    return peers;
  };
  for (;;) {
    bool busy = false, past = false;
    for (int peer = 0; peer < options_.size; ++peer) {
      if (peer == options_.rank) continue;
      const Completion c = CompleteSends(peer, deadline);
      past = past || c == Completion::kLate;
      busy = busy || c == Completion::kBusy;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!past && outstanding_ == 0) return true;
    past = past || std::chrono::steady_clock::now() >= deadline;
    // Another thread is completing some: until it is done, then whatever it left.
    if (!past && busy) {
      past = !cv_.wait_until(lock, deadline, [&] {
        return outstanding_ == 0 || peers_where(/*queued=*/false).empty();
      });
    }
    if (past) {
      late = peers_where(/*queued=*/true);
      return false;
    }
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
  std::unique_ptr<Buffer> buffer = ReceiveContext(peer).createUnboundBuffer(data, bytes);
  buffer->recv(peer, kSpillSlot);  // throws at once if the pair has failed
  return Await(peer, *buffer);
}

void GlooProcessGroup::ExpectDirect(int peer, uint64_t run_set, uint64_t run_index,
                                    uint64_t slot, const ir::ShapedType& type,
                                    std::pair<int64_t, int64_t> elements,
                                    const ir::Tensor& destination) {
  if (PeerEnded(peer)) return;  // it sends nothing more
  std::lock_guard<std::mutex> lock(direct_mu_);
  if (direct_.count(slot) > 0) return;  // posted or taken already
  Direct d{peer, run_set, run_index,
           destination.defined() && destination.type() == type
               ? destination
               : ir::Tensor::Empty(PayloadType(type, elements), receive_allocator_.get()),
           nullptr};
  d.buffer = ReceiveInto(peer, d.x, elements);
  try {
    d.buffer->recv(peer, slot);
  } catch (const std::exception& e) {
    return;  // the pair failed: the receiving thread fails the runs
  }
  direct_.emplace(slot, std::move(d));
}

std::unique_ptr<Buffer> GlooProcessGroup::ReceiveInto(int peer, ir::Tensor& x,
                                                      std::pair<int64_t, int64_t> elements) {
  const int64_t elem = ir::DTypeSize(x.dtype());
  const int64_t count = elements.second - elements.first;
  // A tensor of just those elements, or one of the whole operand they are part of.
  const int64_t at = x.num_elements() == count ? 0 : elements.first;
  return ReceiveContext(peer).createUnboundBuffer(static_cast<char*>(x.data()) + at * elem,
                                                  count * elem);
}

bool GlooProcessGroup::ReceiveDirect(int peer, const Header& h, uint64_t slot,
                                     const ir::ShapedType& type,
                                     std::pair<int64_t, int64_t> elements, ir::Tensor& x) {
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard<std::mutex> lock(direct_mu_);
    auto it = direct_.find(slot);
    if (it != direct_.end() && it->second.buffer != nullptr) {
      x = std::move(it->second.x);
      buffer = std::move(it->second.buffer);
    } else {
      x = ir::Tensor::Empty(PayloadType(type, elements), receive_allocator_.get());
      buffer = ReceiveInto(peer, x, elements);
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

absl::StatusOr<Message> GlooProcessGroup::Open(int peer, const ir::Tensor& envelope_tensor,
                                               bool& adopted) {
  adopted = false;
  const char* envelope = static_cast<const char*>(envelope_tensor.data());
  Message m;
  std::memcpy(&m.header, envelope, sizeof(Header));
  const Header& h = m.header;
  if (h.magic != kWireMagic || h.meta_bytes > kMaxMetaBytes || h.num_payloads > kMaxPayloads) {
    return absl::DataLossError(fmt::format(
        "malformed header (magic {:#x}, {} metadata bytes, {} payloads)", h.magic, h.meta_bytes,
        h.num_payloads));
  }
  const char* at = envelope + sizeof(Header);
  if (h.meta_bytes > 0) {
    std::vector<char> meta(h.meta_bytes);
    if (LayOutEnvelope(h.meta_bytes, 0).meta_inline) {
      std::memcpy(meta.data(), at, meta.size());
      at += meta.size();
    } else if (!ReceiveSpilled(peer, meta.data(), meta.size())) {
      return absl::CancelledError("stopped");
    }
    RETURN_IF_ERROR(DecodeMeta(meta, m));
  } else if (h.num_payloads != 0) {
    return absl::DataLossError("payloads without metadata");
  }
  const auto kind = static_cast<MessageKind>(h.kind);
  std::vector<std::pair<int64_t, int64_t>> elements(m.types.size());
  uint64_t payload_bytes = 0;
  for (size_t i = 0; i < m.types.size(); ++i) {
    ASSIGN_OR_RETURN(auto range, PayloadElements(m, i));  // std::pair<int64_t, int64_t>
    elements[i] = range;
    if (m.sent[i]) {
      payload_bytes += (range.second - range.first) * ir::DTypeSize(m.types[i].dtype);
    }
  }
  const bool direct = PayloadsDirect(kind, payload_bytes);
  const EnvelopeLayout layout = LayOutEnvelope(h.meta_bytes, direct ? 0 : payload_bytes);
  const bool inline_payloads = !direct && layout.payloads_inline;
  if (inline_payloads) at = envelope + layout.payload_offset;
  for (size_t i = 0; i < m.types.size(); ++i) {
    if (!m.sent[i]) continue;
    if (direct && m.types[i].byte_size() > 0) {
      ir::Tensor x;
      const int index =
          kind == MessageKind::kReduced ? kReducedIndex : static_cast<int>(m.payloads.size());
      if (!ReceiveDirect(peer, h,
                         DirectSlot(h.run_set, h.run_index, h.seq, h.position, index, m.types[i],
                                    elements[i]),
                         m.types[i], elements[i], x)) {
        return absl::CancelledError("stopped");
      }
      m.payloads.push_back(std::move(x));
      continue;
    }
    const ir::ShapedType type = PayloadType(m.types[i], elements[i]);
    const int64_t elem = ir::DTypeSize(type.dtype);
    const int64_t offset = at - envelope;
    if (inline_payloads && type.byte_size() >= kAdoptedPayloadBytes && offset % elem == 0) {
      // A view of the envelope, which the receiving thread replaces by a new one.
      m.payloads.push_back(envelope_tensor.Subrange(offset / elem, type));
      at += type.byte_size();
      adopted = true;
      continue;
    }
    ir::Tensor x = ir::Tensor::Empty(type, receive_allocator_.get());
    const size_t bytes = x.byte_size();
    char* to = static_cast<char*>(x.data());
    if (bytes > 0) {
      if (inline_payloads) {
        std::memcpy(to, at, bytes);
        at += bytes;
      } else if (!ReceiveSpilled(peer, to, bytes)) {
        return absl::CancelledError("stopped");
      }
    }
    m.payloads.push_back(std::move(x));
  }
  return m;
}

void GlooProcessGroup::Receive(int peer) {
  // Two envelopes: the next one is posted before the last one is opened, so that the peer's
  // next message leaves at once. A large inline payload is handed on as a view of its envelope,
  // which is then replaced by a new one.
  ir::Tensor envelopes[2];
  std::unique_ptr<Buffer> buffers[2];
  auto make_envelope = [&](int i) {
    envelopes[i] = ir::Tensor::Empty({ir::DType::kF32, {static_cast<int64_t>(kEnvelopeBytes / 4)}},
                                     receive_allocator_.get());
    buffers[i] = ReceiveContext(peer).createUnboundBuffer(envelopes[i].data(), kEnvelopeBytes);
  };
  try {
    for (int i = 0; i < 2; ++i) make_envelope(i);
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
      bool adopted = false;
      m = Open(peer, envelopes[next], adopted);
      if (adopted) make_envelope(next);  // not posted: its receive is done
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

}  // namespace shardjit::runtime::distributed
