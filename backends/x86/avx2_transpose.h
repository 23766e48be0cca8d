// In-register transposes of 8x8 blocks for AVX2 (32-bit lanes in ymm, 16-bit lanes in xmm). The
// functions carry their own target attribute: call them only when ActiveIsa() has AVX2.
#ifndef SHARDJIT_BACKENDS_X86_AVX2_TRANSPOSE_H_
#define SHARDJIT_BACKENDS_X86_AVX2_TRANSPOSE_H_

#include <immintrin.h>

#define SHARDJIT_TARGET_AVX2 __attribute__((target("avx2,fma")))

namespace shardjit::backends::x86 {

// Transposes 8 vectors of 8 32-bit lanes: lane j of r[i] moves to lane i of r[j].
SHARDJIT_TARGET_AVX2 inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Transposes 8 vectors of 8 16-bit lanes: lane j of r[i] moves to lane i of r[j].
SHARDJIT_TARGET_AVX2 inline void Transpose8x8Epi16(__m128i r[8]) {
  __m128i a[8], b[8];
  for (int i = 0; i < 8; i += 2) {
    a[i / 2] = _mm_unpacklo_epi16(r[i], r[i + 1]);
    a[i / 2 + 4] = _mm_unpackhi_epi16(r[i], r[i + 1]);
  }
  // a[0..3]: pairs (rows 2p, 2p+1) of columns 0-3; a[4..7]: of columns 4-7.
  for (int h = 0; h < 8; h += 4) {
    b[h] = _mm_unpacklo_epi32(a[h], a[h + 1]);
    b[h + 1] = _mm_unpackhi_epi32(a[h], a[h + 1]);
    b[h + 2] = _mm_unpacklo_epi32(a[h + 2], a[h + 3]);
    b[h + 3] = _mm_unpackhi_epi32(a[h + 2], a[h + 3]);
  }
  // b[h]: rows 0-3 of columns (h ? 4 : 0) + {0, 1}; b[h+1]: + {2, 3}; b[h+2], b[h+3]: rows 4-7.
  for (int h = 0; h < 8; h += 4) {
    r[h] = _mm_unpacklo_epi64(b[h], b[h + 2]);
    r[h + 1] = _mm_unpackhi_epi64(b[h], b[h + 2]);
    r[h + 2] = _mm_unpacklo_epi64(b[h + 1], b[h + 3]);
    r[h + 3] = _mm_unpackhi_epi64(b[h + 1], b[h + 3]);
  }
}

}  // namespace shardjit::backends::x86

#endif  // SHARDJIT_BACKENDS_X86_AVX2_TRANSPOSE_H_
