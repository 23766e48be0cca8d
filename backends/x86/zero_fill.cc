#include "backends/x86/zero_fill.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace shardjit::backends::x86 {
namespace {

// Zeroes [p, p + bytes) with 16-byte non-temporal stores (SSE2, on every x86-64), memset for the
// unaligned head and tail.
void StreamZero(char* p, int64_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  const int64_t head = std::min<int64_t>(bytes, (16 - address % 16) % 16);
  std::memset(p, 0, head);
  p += head;
  bytes -= head;
  const __m128i zero = _mm_setzero_si128();
  int64_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + i), zero);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + i + 16), zero);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + i + 32), zero);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + i + 48), zero);
  }
  for (; i + 16 <= bytes; i += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p + i), zero);
  std::memset(p + i, 0, bytes - i);
}

}  // namespace

void ZeroRows(void* dst, int64_t rows, int64_t row_bytes, int64_t stride) {
  if (rows <= 0 || row_bytes <= 0) return;
  char* p = static_cast<char*>(dst);
  const bool streaming = rows * row_bytes >= kStreamingZeroBytes;
  auto zero = [streaming](char* at, int64_t bytes) {
    if (streaming) {
      StreamZero(at, bytes);
    } else {
      std::memset(at, 0, bytes);
    }
  };
  if (rows == 1 || stride == row_bytes) {
    zero(p, rows * row_bytes);  // contiguous
  } else {
    for (int64_t i = 0; i < rows; ++i) zero(p + i * stride, row_bytes);
  }
  if (streaming) _mm_sfence();  // non-temporal stores are weakly ordered
}

}  // namespace shardjit::backends::x86
