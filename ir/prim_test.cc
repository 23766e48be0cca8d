// ir::Prim against the registry: one value per registered primitive and one registered primitive
// per value, opcode text <-> enum round trips, and the families agree with the opcode text.
#include "ir/prim.h"

#include <iterator>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "ir/async.h"
#include "ir/primitive.h"

namespace shardjit::ir {
namespace {

TEST(PrimTest, EveryRegisteredPrimitiveHasItsValue) {
  for (const Primitive* p : AllPrimitives()) {
    const Prim prim = PrimFromName(p->name);
    EXPECT_NE(prim, Prim::kUnknown) << p->name << " is registered but has no ir::Prim value";
    EXPECT_EQ(p->prim, prim) << p->name;
    EXPECT_EQ(FindPrimitive(prim), p) << p->name;
    EXPECT_EQ(PrimName(prim), p->name);
  }
}

TEST(PrimTest, EveryValueIsRegistered) {
  std::set<std::string> names;
  for (int i = 1; i < kPrimCount; ++i) {
    const Prim prim = static_cast<Prim>(i);
    const std::string name(PrimName(prim));
    EXPECT_TRUE(names.insert(name).second) << name << " names two values";
    const Primitive* p = FindPrimitive(name);
    ASSERT_NE(p, nullptr) << "ir::Prim value " << i << " (" << name << ") is not registered";
    EXPECT_EQ(p->prim, prim) << name;
    EXPECT_EQ(FindPrimitive(prim), p) << name;
  }
  EXPECT_EQ(names.size(), AllPrimitives().size());
}

TEST(PrimTest, TextRoundTrips) {
  for (int i = 0; i < kPrimCount; ++i) {
    const Prim prim = static_cast<Prim>(i);
    EXPECT_EQ(PrimFromName(PrimName(prim)), prim) << PrimName(prim);
    Op op;
    op.set_opcode(std::string(PrimName(prim)));
    EXPECT_EQ(PrimOf(op), prim) << PrimName(prim);
  }
  for (const char* unknown : {"", "psum_", "Psum", "psumm", "pmax_start", "fori", "x", "add ",
                              "ppermute_done_", "reduce", "dot_general2"}) {
    EXPECT_EQ(PrimFromName(unknown), Prim::kUnknown) << unknown;
  }
  EXPECT_EQ(FindPrimitive(Prim::kUnknown), nullptr);
}

TEST(PrimTest, AsyncFamiliesFollowTheOpcodeText) {
  int starts = 0;
  for (int i = 1; i < kPrimCount; ++i) {
    const Prim prim = static_cast<Prim>(i);
    const std::string name(PrimName(prim));
    EXPECT_FALSE(IsAsyncStart(prim) && IsAsyncDone(prim)) << name;
    if (IsAsyncStart(prim) || IsAsyncDone(prim)) {
      const Prim blocking = AsyncBlocking(prim);
      ASSERT_NE(blocking, Prim::kUnknown) << name;
      EXPECT_EQ(CollectiveKind(prim), blocking) << name;
      EXPECT_TRUE(IsCollective(prim)) << name;
      const std::string text = IsAsyncStart(prim) ? AsyncStartOpcode(PrimName(blocking))
                                                  : AsyncDoneOpcode(PrimName(blocking));
      EXPECT_EQ(name, text);
      EXPECT_EQ(IsAsyncStart(prim) ? AsyncStartOf(blocking) : AsyncDoneOf(blocking), prim) << name;
      starts += IsAsyncStart(prim);
    } else {
      EXPECT_EQ(AsyncBlocking(prim), Prim::kUnknown) << name;
      EXPECT_EQ(CollectiveKind(prim), prim) << name;
      // A blocking primitive has an async form exactly when both halves are registered.
      const bool registered = FindPrimitive(AsyncStartOpcode(name)) != nullptr &&
                              FindPrimitive(AsyncDoneOpcode(name)) != nullptr;
      EXPECT_EQ(AsyncStartOf(prim) != Prim::kUnknown, registered) << name;
      EXPECT_EQ(AsyncDoneOf(prim) != Prim::kUnknown, registered) << name;
    }
  }
  EXPECT_EQ(starts, static_cast<int>(std::size(kAsyncCollectives)));
  EXPECT_FALSE(IsAsyncStart(Prim::kUnknown) || IsAsyncDone(Prim::kUnknown));
  EXPECT_EQ(CollectiveKind(Prim::kUnknown), Prim::kUnknown);
}

TEST(PrimTest, Reductions) {
  EXPECT_TRUE(IsAllReduce(Prim::kPsum) && IsAllReduce(Prim::kPmean) && IsAllReduce(Prim::kPmax) &&
              IsAllReduce(Prim::kPmin));
  EXPECT_FALSE(IsAllReduce(Prim::kPsumScatter) || IsAllReduce(Prim::kPsumStart) ||
               IsAllReduce(Prim::kReduceSum));
  EXPECT_EQ(ReductionOf(Prim::kPsum), ReduceOp::kSum);
  EXPECT_EQ(ReductionOf(Prim::kPmean), ReduceOp::kSum);
  EXPECT_EQ(ReductionOf(Prim::kPsumScatter), ReduceOp::kSum);
  EXPECT_EQ(ReductionOf(Prim::kPmax), ReduceOp::kMax);
  EXPECT_EQ(ReductionOf(Prim::kPmin), ReduceOp::kMin);
  EXPECT_EQ(ReductionOf(Prim::kReduceSum), ReduceOp::kSum);
  EXPECT_EQ(ReductionOf(Prim::kReduceMax), ReduceOp::kMax);
  EXPECT_EQ(ReductionOf(Prim::kReduceMin), ReduceOp::kMin);
  EXPECT_EQ(ReductionOf(Prim::kAllGather), std::nullopt);
  EXPECT_EQ(ReductionOf(Prim::kAdd), std::nullopt);
  for (Prim p : {Prim::kPsum, Prim::kPmax, Prim::kPmin}) {
    EXPECT_EQ(AllReduceOf(*ReductionOf(p)), p) << PrimName(p);
  }
  EXPECT_TRUE(IsPointToPoint(Prim::kPsend) && IsPointToPoint(Prim::kPrecv));
  EXPECT_FALSE(IsPointToPoint(Prim::kPpermute));
}

}  // namespace
}  // namespace shardjit::ir
