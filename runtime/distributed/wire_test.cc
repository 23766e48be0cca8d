// The wire format: what a message's envelope holds, metadata round trips, direct payload slots.
#include "runtime/distributed/wire.h"

#include <set>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardjit::runtime::distributed {
namespace {

TEST(Wire, EnvelopeHoldsWhatFits) {
  const uint64_t h = sizeof(Header);
  EnvelopeLayout all = LayOutEnvelope(100, 1000);
  EXPECT_TRUE(all.meta_inline);
  EXPECT_TRUE(all.payloads_inline);
  // Payloads start past the metadata at a multiple of kPayloadAlignment.
  const uint64_t payloads = (h + 100 + kPayloadAlignment - 1) / kPayloadAlignment *
                            kPayloadAlignment;
  EXPECT_EQ(all.payload_offset, payloads);
  EXPECT_EQ(all.payload_offset % kPayloadAlignment, 0u);
  EXPECT_EQ(all.bytes, payloads + 1000);
  EXPECT_EQ(LayOutEnvelope(100, 0).bytes, h + 100);  // no payload, no padding
  // Exactly full, and one byte over.
  EnvelopeLayout full = LayOutEnvelope(100, kEnvelopeBytes - payloads);
  EXPECT_TRUE(full.payloads_inline);
  EXPECT_EQ(full.bytes, kEnvelopeBytes);
  EnvelopeLayout over = LayOutEnvelope(100, kEnvelopeBytes - payloads + 1);
  EXPECT_TRUE(over.meta_inline);
  EXPECT_FALSE(over.payloads_inline);
  EXPECT_EQ(over.bytes, h + 100);
  // Metadata too large: the envelope is the header alone, and nothing else is inline.
  EnvelopeLayout big_meta = LayOutEnvelope(kEnvelopeBytes, 0);
  EXPECT_FALSE(big_meta.meta_inline);
  EXPECT_FALSE(big_meta.payloads_inline);
  EXPECT_EQ(big_meta.bytes, h);
  EnvelopeLayout empty = LayOutEnvelope(0, 0);
  EXPECT_TRUE(empty.payloads_inline);
  EXPECT_EQ(empty.bytes, h);
}

TEST(Wire, MetadataRoundTrip) {
  Message m;
  m.header.kind = static_cast<uint32_t>(MessageKind::kArrival);
  m.signature = "psum over x";
  m.types = {ir::ShapedType{ir::DType::kF32, {3, 5}}, ir::ShapedType{ir::DType::kBF16, {7}}};
  m.sent = {true, false};
  m.header.num_payloads = 1;
  std::vector<char> bytes = EncodeMeta(m);
  Message back;
  back.header = m.header;
  ASSERT_TRUE(DecodeMeta(bytes, back).ok());
  EXPECT_EQ(back.signature, m.signature);
  ASSERT_EQ(back.types.size(), 2u);
  EXPECT_EQ(back.types[0].dims, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(back.types[1].dtype, ir::DType::kBF16);
  EXPECT_EQ(back.sent, m.sent);
  // Cut short: refused, never read past the end.
  bytes.resize(bytes.size() / 2);
  EXPECT_FALSE(DecodeMeta(bytes, back).ok());
}

// The slot of all elements of a payload of type `type`.
uint64_t WholeSlot(uint64_t run_set, uint64_t run_index, int64_t seq, int64_t position, int index,
                   const ir::ShapedType& type) {
  return DirectSlot(run_set, run_index, seq, position, index, type, {0, type.num_elements()});
}

TEST(Wire, DirectSlotsAreDistinctPerPayloadTypeAndRange) {
  const ir::ShapedType f32{ir::DType::kF32, {3, 160, 160}};
  const uint64_t slot = WholeSlot(7, 2, 5, 1, 0, f32);
  EXPECT_EQ(slot, WholeSlot(7, 2, 5, 1, 0, f32));  // the same in sender and receiver
  EXPECT_NE(slot >> 63, 0u);                       // never an envelope or spill slot
  std::set<uint64_t> slots = {slot};
  // Any field, the type or the elements differing gives another slot.
  for (uint64_t other : {WholeSlot(8, 2, 5, 1, 0, f32), WholeSlot(7, 3, 5, 1, 0, f32),
                         WholeSlot(7, 2, 6, 1, 0, f32), WholeSlot(7, 2, 5, 2, 0, f32),
                         WholeSlot(7, 2, 5, 1, 1, f32), WholeSlot(7, 2, 5, 1, kReducedIndex, f32),
                         WholeSlot(7, 2, 5, 1, 0, {ir::DType::kS32, {3, 160, 160}}),
                         WholeSlot(7, 2, 5, 1, 0, {ir::DType::kF32, {3, 160, 161}}),
                         WholeSlot(7, 2, 5, 1, 0, {ir::DType::kF32, {3, 160, 160, 1}}),
                         WholeSlot(7, 2, 5, 1, 0, {ir::DType::kF32, {160, 3, 160}}),
                         DirectSlot(7, 2, 5, 1, 0, f32, {0, 38400}),
                         DirectSlot(7, 2, 5, 1, 0, f32, {38400, 76800}),
                         DirectSlot(7, 2, 5, 1, kReducedIndex, f32, {0, 38400})}) {
    EXPECT_TRUE(slots.insert(other).second);
  }
  // Many payloads in flight at once: no two share a slot.
  std::set<uint64_t> many;
  for (int64_t seq = 0; seq < 200; ++seq) {
    for (int64_t position = 0; position < 16; ++position) {
      for (int index = 0; index < 3; ++index) {
        EXPECT_TRUE(many.insert(WholeSlot(7, 2, seq, position, index, f32)).second);
      }
      for (int64_t piece = 0; piece < 4; ++piece) {
        EXPECT_TRUE(many.insert(DirectSlot(7, 2, seq, position, kReducedIndex, f32,
                                           {piece * 1000, (piece + 1) * 1000}))
                        .second);
      }
    }
  }
  EXPECT_TRUE(PayloadsDirect(MessageKind::kArrival, kDirectPayloadBytes + 1));
  EXPECT_TRUE(PayloadsDirect(MessageKind::kReduced, kDirectPayloadBytes + 1));
  EXPECT_FALSE(PayloadsDirect(MessageKind::kArrival, kDirectPayloadBytes));
  EXPECT_FALSE(PayloadsDirect(MessageKind::kMail, kDirectPayloadBytes + 1));
}

TEST(Wire, PayloadElementsAreAllOrAShareWithinTheOperand) {
  Message m;
  m.header.kind = static_cast<uint32_t>(MessageKind::kArrival);
  m.types = {{ir::DType::kF32, {4, 25}}};
  m.sent = {true};
  EXPECT_EQ(*PayloadElements(m, 0), (std::pair<int64_t, int64_t>{0, 100}));
  m.offsets = {{50, 100}};
  EXPECT_EQ(*PayloadElements(m, 0), (std::pair<int64_t, int64_t>{50, 100}));
  // Empty, reversed, past the end, negative or not a pair: refused, naming the range.
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
           {50, 50}, {60, 50}, {50, 101}, {-1, 10}, {5}, {1, 2, 3}}) {
    m.offsets = {bad};
    const absl::Status s = PayloadElements(m, 0).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), ::testing::HasSubstr("elements ["));
  }
  // Offsets of other kinds (a block's place in its array) are not ranges.
  m.header.kind = static_cast<uint32_t>(MessageKind::kBlocks);
  m.offsets = {{1, 0}};
  EXPECT_EQ(*PayloadElements(m, 0), (std::pair<int64_t, int64_t>{0, 100}));
}

}  // namespace
}  // namespace shardjit::runtime::distributed
