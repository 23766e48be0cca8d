// The messages processes of a distributed job send each other, and their encoding. A message is
// a fixed 64-byte header, its metadata (`meta_bytes` long, absent when 0) and one payload per
// operand sent (the tensor's bytes). It travels as an envelope of at most kEnvelopeBytes, which
// the receiver keeps posted ahead so that it leaves at once: the header, then the metadata if it
// fits, then the payloads if they all fit too (EnvelopeLayout); what does not fit follows
// separately, in order, received straight into place (a payload into a tensor of its type).
// The payloads of an arrival past kDirectPayloadBytes go apart from the start, each on a slot of
// its own (DirectSlot), which the receiving process may post before the envelope comes.
// Everything is in the sender's byte order: the processes of a job run the same build on x86.
#ifndef SHARDJIT_RUNTIME_DISTRIBUTED_WIRE_H_
#define SHARDJIT_RUNTIME_DISTRIBUTED_WIRE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/tensor.h"
#include "ir/types.h"

namespace shardjit::runtime::distributed {

enum class MessageKind : uint32_t {
  kArrival = 1,  // a position's arrival at a collective (operands, or only their types)
  kMail = 2,     // a psend's operand for a position of the receiver
  kFailure = 3,  // the run failed (its status in `text`)
  kBlocks = 4,   // blocks of a host array (ProcessGroup::ExchangeBlocks)
  kBye = 5,      // the sender is done: nothing more will come from it
  kReduced = 6,  // elements of a split all-reduce's result (RemotePeers::PostReduced)
  kKernel = 7,   // a kernel's copy or signal for a position of the receiver (RemoteKernelOp)
};

inline constexpr uint32_t kWireMagic = 0x534a4d31;  // "SJM1"
// Limits a receiver enforces before allocating what a header announces.
inline constexpr uint64_t kMaxMetaBytes = 64 << 20;
inline constexpr uint32_t kMaxPayloads = 1 << 16;

struct Header {
  uint32_t magic = kWireMagic;
  uint32_t kind = 0;
  uint64_t run_set = 0;    // the run's processes (RunSetKey); 0 for job-level messages
  uint64_t run_index = 0;  // the run's number among that set's runs, or the exchange's number
  int64_t seq = 0;         // kArrival, kReduced: the collective's number in the run
  int64_t position = 0;    // the sending mesh position; kReduced: the group's first member
  int64_t target = 0;      // kMail, kKernel: the receiving mesh position
  uint64_t meta_bytes = 0;
  uint32_t num_payloads = 0;
  uint32_t status_code = 0;  // kFailure: the absl::StatusCode
};
static_assert(sizeof(Header) == 64, "the header is sent as raw bytes");

// A message, decoded. `types[i]` is the type of operand i; `sent[i]` says whether its bytes
// follow (a payload), in operand order; `offsets[i]` is block i's place in its array (kBlocks),
// or for kArrival and kReduced, when present, {begin, end}: the payload holds only elements
// [begin, end) of operand i (a split all-reduce's share, runtime/remote.h).
struct Message {
  Header header;
  std::string signature;  // kArrival: ResolvedCollective::signature
  std::string text;       // kFailure: the status message
  std::vector<ir::ShapedType> types;
  std::vector<bool> sent;
  std::vector<std::vector<int64_t>> offsets;
  std::vector<ir::Tensor> payloads;  // one per `sent` operand, in order
};

// The metadata bytes of `m` (everything but the header and payloads).
std::vector<char> EncodeMeta(const Message& m);
// Fills `m`'s metadata from `bytes`, refusing anything malformed (lengths past the end, ranks or
// dims past ir's limits, a payload count that disagrees with the header).
absl::Status DecodeMeta(const std::vector<char>& bytes, Message& m);

// The elements [first, second) of operand `i` of `m` its payload holds (all of them unless
// `m.offsets` says otherwise); an error naming the message if they are not within the operand.
absl::StatusOr<std::pair<int64_t, int64_t>> PayloadElements(const Message& m, size_t i);
// The type of a tensor holding just `elements` of an operand of type `type`: `type` when they
// are all of it, else a vector of them.
inline ir::ShapedType PayloadType(const ir::ShapedType& type,
                                  std::pair<int64_t, int64_t> elements) {
  const int64_t count = elements.second - elements.first;
  if (elements.first == 0 && count == type.num_elements()) return type;
  return ir::ShapedType{type.dtype, {count}};
}

// The largest envelope; the receiver keeps one posted per peer (and one more while it reads). It
// holds 1 MiB of payload with room for the metadata: a message that fits in it travels as one
// send into a receive posted long before, where a spilled payload pays a second send and its
// receive's notice. Arrivals and reduced pieces past kDirectPayloadBytes go direct instead.
inline constexpr uint64_t kEnvelopeBytes = (1 << 20) + (64 << 10);

// What a message's envelope holds beyond the header, from its metadata and payload sizes (sender
// and receiver both decide it from the header and the metadata).
struct EnvelopeLayout {
  bool meta_inline = false;
  bool payloads_inline = false;
  // Where inline payloads start: past the metadata, at a multiple of kPayloadAlignment, so that
  // the receiver may hand a payload on as a view of the envelope (no copy).
  uint64_t payload_offset = 0;
  uint64_t bytes = 0;  // the envelope's size
};
inline constexpr uint64_t kPayloadAlignment = 64;
EnvelopeLayout LayOutEnvelope(uint64_t meta_bytes, uint64_t payload_bytes);

// Arrivals whose payloads total more than this many bytes send each payload on its DirectSlot:
// the receiving process knows their types as soon as one of its devices arrives at the
// collective (a group agrees on them) and posts the receive then, so that the data leaves as
// soon as both sides are there, not a round trip after the envelope. Nothing copies them on
// either side (an inline payload is copied into the envelope): past this size the copies saved
// outweigh the round trip a late receiver costs.
inline constexpr uint64_t kDirectPayloadBytes = 256 << 10;
// So do the results of split all-reduces, which the receiver posts in place ahead.
inline bool PayloadsDirect(MessageKind kind, uint64_t payload_bytes) {
  return (kind == MessageKind::kArrival || kind == MessageKind::kReduced) &&
         payload_bytes > kDirectPayloadBytes;
}
// The slot of payload `index` (elements `elements` of an operand of type `type`) of mesh
// position `position`'s arrival at collective `seq` of run (`run_set`, `run_index`), or with
// `index` kReducedIndex of a split all-reduce's result piece (`position`: the group's first
// member): the same in sender and receiver, distinct for every payload in flight, and never one
// of the envelope's or spill's slots (its top bit is set). A receive posted for a type or range
// other than the one sent never meets the send.
inline constexpr int kReducedIndex = -1;
uint64_t DirectSlot(uint64_t run_set, uint64_t run_index, int64_t seq, int64_t position,
                    int index, const ir::ShapedType& type,
                    std::pair<int64_t, int64_t> elements);

// A key for the set of processes `processes` (sorted), the same in every process.
uint64_t RunSetKey(const std::vector<int>& processes);

}  // namespace shardjit::runtime::distributed

#endif  // SHARDJIT_RUNTIME_DISTRIBUTED_WIRE_H_
