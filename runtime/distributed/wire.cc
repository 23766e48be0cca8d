#include "runtime/distributed/wire.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"

namespace shardjit::runtime::distributed {
namespace {

class Writer {
 public:
  void U64(uint64_t v) { Raw(&v, sizeof(v)); }
  void I64(int64_t v) { Raw(&v, sizeof(v)); }
  void Bytes(const std::string& s) {
    U64(s.size());
    Raw(s.data(), s.size());
  }
  std::vector<char> Take() { return std::move(out_); }

 private:
  void Raw(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  std::vector<char> out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& in) : in_(in) {}
  bool U64(uint64_t& v) { return Raw(&v, sizeof(v)); }
  bool I64(int64_t& v) { return Raw(&v, sizeof(v)); }
  bool Bytes(std::string& s) {
    uint64_t n = 0;
    if (!U64(n) || n > in_.size() - pos_) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool Raw(void* p, size_t n) {
    if (n > in_.size() - pos_) return false;
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  const std::vector<char>& in_;
  size_t pos_ = 0;
};

absl::Status Malformed(const Message& m, const std::string& what) {
  return absl::DataLossError(fmt::format(
      "malformed message (kind {}) {} mesh position {}: {}", m.header.kind,
      m.header.kind == static_cast<uint32_t>(MessageKind::kReduced) ? "for the group of" : "from",
      m.header.position, what));
}

}  // namespace

std::vector<char> EncodeMeta(const Message& m) {
  Writer w;
  w.Bytes(m.signature);
  w.Bytes(m.text);
  w.U64(m.types.size());
  for (size_t i = 0; i < m.types.size(); ++i) {
    const ir::ShapedType& t = m.types[i];
    w.U64(static_cast<uint64_t>(t.dtype));
    w.U64(t.dims.size());
    for (int64_t d : t.dims) w.I64(d);
    w.U64(i < m.sent.size() && m.sent[i] ? 1 : 0);
  }
  w.U64(m.offsets.size());
  for (const std::vector<int64_t>& offset : m.offsets) {
    w.U64(offset.size());
    for (int64_t o : offset) w.I64(o);
  }
  return w.Take();
}

absl::Status DecodeMeta(const std::vector<char>& bytes, Message& m) {
  Reader r(bytes);
  uint64_t count = 0;
  if (!r.Bytes(m.signature) || !r.Bytes(m.text) || !r.U64(count)) {
    return Malformed(m, "truncated metadata");
  }
  if (count > kMaxPayloads) return Malformed(m, fmt::format("{} operands", count));
  m.types.assign(count, {});
  m.sent.assign(count, false);
  uint64_t sent = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t dtype = 0, rank = 0, flag = 0;
    if (!r.U64(dtype) || !r.U64(rank) || rank > 64) return Malformed(m, "truncated type");
    ir::ShapedType& t = m.types[i];
    t.dtype = static_cast<ir::DType>(dtype);
    t.dims.resize(rank);
    for (int64_t& d : t.dims) {
      if (!r.I64(d)) return Malformed(m, "truncated dims");
    }
    if (!r.U64(flag)) return Malformed(m, "truncated type");
    if (dtype < 1 || dtype > 4) return Malformed(m, fmt::format("dtype {}", dtype));
    if (absl::Status s = ir::CheckTypeLimits(t); !s.ok()) return Malformed(m, s.ToString());
    m.sent[i] = flag != 0;
    sent += m.sent[i] ? 1 : 0;
  }
  if (!r.U64(count) || count > kMaxPayloads) return Malformed(m, "truncated offsets");
  m.offsets.assign(count, {});
  for (std::vector<int64_t>& offset : m.offsets) {
    uint64_t rank = 0;
    if (!r.U64(rank) || rank > 64) return Malformed(m, "truncated offset");
    offset.resize(rank);
    for (int64_t& o : offset) {
      if (!r.I64(o)) return Malformed(m, "truncated offset");
    }
  }
  if (!r.done()) return Malformed(m, "trailing bytes");
  if (sent != m.header.num_payloads) {
    return Malformed(m, fmt::format("{} payloads announced, {} operands sent",
                                    m.header.num_payloads, sent));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> PayloadElements(const Message& m, size_t i) {
  const int64_t n = m.types[i].num_elements();
  const auto kind = static_cast<MessageKind>(m.header.kind);
  if (i >= m.offsets.size() || (kind != MessageKind::kArrival && kind != MessageKind::kReduced)) {
    return std::pair<int64_t, int64_t>{0, n};
  }
  const std::vector<int64_t>& range = m.offsets[i];
  if (range.size() != 2 || range[0] < 0 || range[0] >= range[1] || range[1] > n) {
    return Malformed(m, fmt::format("elements [{}] of operand {} ({})",
                                    absl::StrJoin(range, ", "), i, m.types[i].ToString()));
  }
  return std::pair<int64_t, int64_t>{range[0], range[1]};
}

EnvelopeLayout LayOutEnvelope(uint64_t meta_bytes, uint64_t payload_bytes) {
  EnvelopeLayout layout;
  layout.bytes = sizeof(Header);
  layout.meta_inline = meta_bytes <= kEnvelopeBytes - layout.bytes;
  if (!layout.meta_inline) return layout;
  layout.bytes += meta_bytes;
  if (payload_bytes == 0) {  // nothing to place: no padding
    layout.payloads_inline = true;
    layout.payload_offset = layout.bytes;
    return layout;
  }
  const uint64_t offset = (layout.bytes + kPayloadAlignment - 1) / kPayloadAlignment *
                          kPayloadAlignment;
  layout.payloads_inline = offset <= kEnvelopeBytes && payload_bytes <= kEnvelopeBytes - offset;
  if (layout.payloads_inline) {
    layout.payload_offset = offset;
    layout.bytes = offset + payload_bytes;
  }
  return layout;
}

namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace

uint64_t DirectSlot(uint64_t run_set, uint64_t run_index, int64_t seq, int64_t position,
                    int index, const ir::ShapedType& type,
                    std::pair<int64_t, int64_t> elements) {
  uint64_t h = Mix(Mix(Mix(run_set, run_index), static_cast<uint64_t>(seq)),
                   static_cast<uint64_t>(position));
  h = Mix(Mix(h, static_cast<uint64_t>(index)), static_cast<uint64_t>(type.dtype));
  for (int64_t d : type.dims) h = Mix(h, static_cast<uint64_t>(d));
  h = Mix(Mix(h, static_cast<uint64_t>(elements.first)), static_cast<uint64_t>(elements.second));
  return Mix(h, type.dims.size()) | (uint64_t{1} << 63);
}

uint64_t RunSetKey(const std::vector<int>& processes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (int p : processes) {
    h ^= static_cast<uint64_t>(p) + 1;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

}  // namespace shardjit::runtime::distributed
