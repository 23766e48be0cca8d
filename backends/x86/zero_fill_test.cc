// ZeroRows: exactly the rows' bytes become zero, below and above the streaming threshold, at
// aligned and unaligned starts, with and without gaps between rows.
#include "backends/x86/zero_fill.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace shardjit::backends::x86 {
namespace {

struct Fill {
  int64_t offset, rows, row_bytes, stride;
};

TEST(ZeroRows, ZeroesExactlyTheRows) {
  const int64_t big = kStreamingZeroBytes;
  for (const Fill& f : {
           Fill{0, 0, 64, 64},                  // nothing
           Fill{3, 1, 1, 1},                    // one byte
           Fill{5, 3, 15, 40},                  // rows shorter than a store
           Fill{0, 1, 4096, 0},                 // one aligned row (any stride)
           Fill{7, 4, 100, 100},                // contiguous, unaligned
           Fill{0, 1, big, big},                // streaming, one block
           Fill{9, 1, big + 77, big + 77},      // streaming, unaligned head and tail
           Fill{1, 300, 4000, 4100},            // streaming rows with gaps
           Fill{16, 257, 4096, 4096},           // streaming, contiguous rows
           Fill{2, 2, big / 2 + 30, big / 2 + 31},  // streaming, two long rows one byte apart
       }) {
    const int64_t span = f.rows == 0 ? 0 : (f.rows - 1) * f.stride + f.row_bytes;
    std::vector<uint8_t> buffer(f.offset + span + 64, 0xab);
    ZeroRows(buffer.data() + f.offset, f.rows, f.row_bytes, f.stride);
    int64_t wrong = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(buffer.size()); ++i) {
      const int64_t at = i - f.offset;
      const bool in_row = at >= 0 && at < span && at % (f.stride == 0 ? 1 : f.stride) < f.row_bytes;
      const bool zeroed = f.rows == 1 ? (at >= 0 && at < f.row_bytes) : in_row;
      wrong += buffer[i] != (zeroed ? 0 : 0xab);
    }
    EXPECT_EQ(wrong, 0) << "offset=" << f.offset << " rows=" << f.rows
                        << " row_bytes=" << f.row_bytes << " stride=" << f.stride;
  }
}

}  // namespace
}  // namespace shardjit::backends::x86
