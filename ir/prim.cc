#include "ir/prim.h"

#include <array>

#include "ir/ir.pb.h"

namespace shardjit::ir {
namespace {

// Open addressing over a power-of-two table, at most a quarter full.
constexpr size_t kSlots = 1024;
static_assert(kSlots >= 4 * kPrimCount);

// Opcodes differ in their length and first, second, middle and last characters often enough
// that a probe rarely goes past the first slot; a hit is confirmed against the candidate's text.
constexpr size_t Hash(std::string_view s) {
  if (s.empty()) return 0;
  size_t h = s.size();
  h = h * 31 + static_cast<unsigned char>(s.front());
  h = h * 31 + static_cast<unsigned char>(s[s.size() / 2]);
  h = h * 31 + static_cast<unsigned char>(s.back());
  if (s.size() > 1) h = h * 31 + static_cast<unsigned char>(s[1]);
  return h;
}

using Table = std::array<Prim, kSlots>;  // kUnknown: empty

constexpr Table BuildTable() {
  Table table{};
  for (int i = 1; i < kPrimCount; ++i) {
    size_t slot = Hash(PrimName(static_cast<Prim>(i))) % kSlots;
    while (table[slot] != Prim::kUnknown) slot = (slot + 1) % kSlots;
    table[slot] = static_cast<Prim>(i);
  }
  return table;
}

constexpr Table kTable = BuildTable();

constexpr Prim Lookup(std::string_view opcode) {
  for (size_t slot = Hash(opcode) % kSlots;; slot = (slot + 1) % kSlots) {
    const Prim p = kTable[slot];
    if (p == Prim::kUnknown || PrimName(p) == opcode) return p;
  }
}

// Every value's text is distinct and finds that value.
constexpr bool RoundTrips() {
  for (int i = 1; i < kPrimCount; ++i) {
    if (PrimName(static_cast<Prim>(i)).empty() ||
        Lookup(PrimName(static_cast<Prim>(i))) != static_cast<Prim>(i)) {
      return false;
    }
  }
  return Lookup("") == Prim::kUnknown;
}
static_assert(RoundTrips());

// The most slots a known opcode's lookup reads: a few, or Hash needs another character.
constexpr int LongestProbe() {
  int longest = 0;
  for (int i = 1; i < kPrimCount; ++i) {
    int probes = 1;
    for (size_t slot = Hash(PrimName(static_cast<Prim>(i))) % kSlots;
         kTable[slot] != static_cast<Prim>(i); slot = (slot + 1) % kSlots) {
      ++probes;
    }
    longest = probes > longest ? probes : longest;
  }
  return longest;
}
static_assert(LongestProbe() <= 4);

}  // namespace

Prim PrimFromName(std::string_view opcode) { return Lookup(opcode); }

Prim PrimOf(const Op& op) { return Lookup(op.opcode()); }

}  // namespace shardjit::ir
