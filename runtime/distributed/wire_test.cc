// The wire format: what a message's envelope holds, and metadata round trips.
#include "runtime/distributed/wire.h"

#include "gtest/gtest.h"

namespace shardjit::runtime::distributed {
namespace {

TEST(Wire, EnvelopeHoldsWhatFits) {
  const uint64_t h = sizeof(Header);
  EnvelopeLayout all = LayOutEnvelope(100, 1000);
  EXPECT_TRUE(all.meta_inline);
  EXPECT_TRUE(all.payloads_inline);
  EXPECT_EQ(all.bytes, h + 100 + 1000);
  // Exactly full, and one byte over.
  EnvelopeLayout full = LayOutEnvelope(100, kEnvelopeBytes - h - 100);
  EXPECT_TRUE(full.payloads_inline);
  EXPECT_EQ(full.bytes, kEnvelopeBytes);
  EnvelopeLayout over = LayOutEnvelope(100, kEnvelopeBytes - h - 99);
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

}  // namespace
}  // namespace shardjit::runtime::distributed
