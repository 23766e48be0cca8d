// Writes generated GEMM micro-kernels, with packed inputs and the results of the portable
// micro-kernel, for run_kernels.py to execute in an AVX-512 emulator. This is how the AVX-512
// kernels are checked on hosts without AVX-512.
//   bazel run //backends/x86/emulation:dump_kernels -- /tmp/gemm_cases
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/x86/emulation/case_writer.h"
#include "backends/x86/gemm_kernel.h"
#include "backends/x86/gemm_kernel_avx2.h"
#include "backends/x86/gemm_kernel_avx512.h"
#include "ir/dtype.h"

namespace shardjit::backends::x86 {
namespace {

using emulation::Bytes;
using emulation::kGuestArgs;
using emulation::kGuestData;

// A, B and C in the first three guest data regions; a streaming kernel's source and
// destination in the next two.
constexpr uint64_t kGuestA = kGuestData[0], kGuestB = kGuestData[1], kGuestC = kGuestData[2];
constexpr uint64_t kGuestStreamSrc = kGuestData[3], kGuestStreamDst = kGuestData[4];
// int8 kernels' column offsets.
constexpr uint64_t kGuestColOffset = kGuestData[5];

std::vector<KernelKey> Keys() {
  std::vector<KernelKey> keys;
  for (PanelLayout layout : {PanelLayout::kF32, PanelLayout::kBf16Pairs}) {
    const IsaLevel isa = layout == PanelLayout::kF32 ? IsaLevel::kAvx512 : IsaLevel::kAvx512Bf16;
    for (int rows = 1; rows <= 6; ++rows) {
      for (int tail = 0; tail <= 4; ++tail) keys.push_back({layout, isa, 6, 64, rows, tail});
    }
  }
  for (int rows = 1; rows <= 6; ++rows) {
    for (int tail = 0; tail <= 4; ++tail) {
      keys.push_back({PanelLayout::kS8Quads, IsaLevel::kAvx512, 6, 64, rows, tail});
    }
  }
  for (int rows = 1; rows <= 6; ++rows) {
    for (int tail = 0; tail <= 2; ++tail) {
      keys.push_back({PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, rows, tail});
    }
  }
  // Streaming kernels: kF32 layout of f32 and of bf16 widened, kBf16Pairs of bf16.
  for (RowSource source : {RowSource::kF32, RowSource::kBf16}) {
    for (int rows : {1, 5, 6}) {
      for (int tail : {0, 1, 4}) {
        keys.push_back({PanelLayout::kF32, IsaLevel::kAvx512, 6, 64, rows, tail, source});
        if (source == RowSource::kBf16) {
          keys.push_back(
              {PanelLayout::kBf16Pairs, IsaLevel::kAvx512Bf16, 6, 64, rows, tail, source});
        }
      }
      keys.push_back({PanelLayout::kF32, IsaLevel::kAvx2, 6, 16, rows, 1, source});
    }
    // Copying 2, 4 or 8 steps per iteration.
    for (int stream_rows : {2, 4, 8}) {
      keys.push_back({PanelLayout::kF32, IsaLevel::kAvx512, 6, 64, 6, 1, source, stream_rows});
      if (source == RowSource::kBf16) {
        keys.push_back(
            {PanelLayout::kBf16Pairs, IsaLevel::kAvx512Bf16, 6, 64, 6, 0, source, stream_rows});
      }
    }
  }
  // Kernels that read f32 or bf16 rows of B in place: one tile of 1 to 31 rows (AVX2: 6),
  // panels as InPlacePlan makes them.
  for (RowSource rows_of : {RowSource::kF32, RowSource::kBf16}) {
    for (int rows : {1, 4, 7, 8, 9, 10, 15, 16, 31}) {
      const int nr = rows <= 7 ? 64 : rows <= 9 ? 48 : rows <= 15 ? 32 : 16;
      keys.push_back({PanelLayout::kF32, IsaLevel::kAvx512, rows, nr, rows, 0});
      keys.back().b_in_place = rows_of;
    }
    for (int rows : {1, 3, 6}) {
      const int nr = rows == 1 ? 56 : rows == 3 ? 24 : 16;
      keys.push_back({PanelLayout::kF32, IsaLevel::kAvx2, rows, nr, rows, 0});
      keys.back().b_in_place = rows_of;
    }
  }
  return keys;
}

bool DumpMicroKernels(emulation::CaseWriter& writer) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> small(-3, 3), c_value(-8, 8);
  // Small integers: every product and sum is exact, so results must match bit for bit.
  // int8 quads: any bytes (int32 sums wrap exactly).
  auto value = [&](PanelLayout layout) -> uint32_t {
    if (layout == PanelLayout::kS8Quads) return static_cast<uint32_t>(rng());
    if (layout == PanelLayout::kF32) {
      float f = static_cast<float>(small(rng));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    uint32_t lo = ir::bf16::FromFloat(static_cast<float>(small(rng)));
    uint32_t hi = ir::bf16::FromFloat(static_cast<float>(small(rng)));
    return lo | hi << 16;
  };
  for (const KernelKey& key : Keys()) {
    std::unique_ptr<JitGenerator> gen;
    if (key.isa == IsaLevel::kAvx2) {
      gen = std::make_unique<GemmKernelAvx2>(key);
    } else {
      gen = std::make_unique<GemmKernelAvx512>(key);
    }
    if (!gen->Create().ok()) {
      std::fprintf(stderr, "generation failed: %s\n", key.Name().c_str());
      return false;
    }
    const int lanes = key.isa == IsaLevel::kAvx2 ? 8 : 16;
    const bool streams = key.stream != RowSource::kNone;
    for (int n_panels : {0, 1, 2}) {
      if (n_panels == 0 && key.tail_vecs == 0) continue;
      for (int k_steps : streams ? std::vector<int>{8, 17} : std::vector<int>{1, 5, 8}) {
        for (int accumulate : {0, 1}) {
          const int tail_cols =
              key.tail_vecs == 0 ? 0 : (key.tail_vecs - 1) * lanes + 1 + rng() % lanes;
          const int64_t ldc = (n_panels + 1) * key.nr + 7;
          // Packed panels apart, or (in place) rows of B with padding past the panels; a bf16
          // row reads each f32 small integer as the bf16 pair (0, the integer).
          const bool in_place = key.b_in_place != RowSource::kNone;
          const int b_elem = RowElementBytes(key.b_in_place);
          const int64_t b_stride = in_place ? key.nr * b_elem : k_steps * key.nr * 4 + 256;
          const int64_t b_row = (n_panels + 1) * key.nr + 5;
          std::vector<uint32_t> a(k_steps * key.mr),
              b(in_place ? k_steps * b_row : (n_panels + 1) * b_stride / 4);
          for (uint32_t& x : a) x = value(key.layout);
          for (uint32_t& x : b) x = value(key.layout);
          std::vector<float> c_in(key.rows * ldc + 16);
          for (float& x : c_in) x = static_cast<float>(c_value(rng));
          std::vector<float> want = c_in;
          MicroKernelArgs args;
          args.a = a.data();
          args.b = b.data();
          args.c = want.data();
          args.ldc = ldc * 4;
          args.k_steps = k_steps;
          args.n_panels = n_panels;
          args.b_panel_stride = b_stride;
          if (in_place) args.b_step_stride = b_row * b_elem;
          args.accumulate = accumulate;
          if (key.tail_vecs > 0) SetTailMasks(tail_cols, &args);
          // int8 kernels: column offsets in every other case (null in the others).
          std::vector<int32_t> col_offset((n_panels + 1) * key.nr);
          for (int32_t& x : col_offset) x = static_cast<int32_t>(rng());
          const bool with_offset = key.layout == PanelLayout::kS8Quads && k_steps % 2 == 1;
          if (with_offset) args.col_offset = col_offset.data();
          // Streaming: rows of a row-major source (padded rows; two per step of bf16 pairs)
          // into packed panels with room past the copied steps, which must stay as they were.
          const bool pairs = key.layout == PanelLayout::kBf16Pairs;
          const int64_t iters = streams ? k_steps / kStreamSteps : 0;
          const int elem = RowElementBytes(key.stream);
          const int64_t src_stride = ((n_panels + 2) * key.nr + 3) * (pairs ? 2 : 1);
          const int64_t copied = iters * key.stream_rows;
          const int64_t dst_panel = copied * key.nr + 16;
          std::vector<uint8_t> src(streams ? (copied * src_stride + 16) * elem : 0);
          for (size_t at = 0; at < src.size(); at += elem) {
            const uint32_t x = value(PanelLayout::kF32);  // an f32 small integer
            const uint16_t high = static_cast<uint16_t>(x >> 16);  // exact in bf16
            std::memcpy(&src[at], elem == 4 ? static_cast<const void*>(&x) : &high, elem);
          }
          std::vector<float> dst_in(streams ? std::max(n_panels, 1) * dst_panel : 0, -100.0f);
          std::vector<float> dst_want = dst_in;
          if (streams) {
            args.stream_src = src.data();
            args.stream_dst = dst_want.data();
            args.stream_src_stride = src_stride * elem;
            args.stream_dst_panel_stride = dst_panel * 4;
            args.stream_iters = iters;
            args.stream_panels = accumulate ? n_panels : n_panels / 2;
            args.stream_last_ahead = 64;
          }
          args.key = &key;
          PortableMicroKernel(&args);
          args.a = reinterpret_cast<const void*>(kGuestA);
          args.b = reinterpret_cast<const void*>(kGuestB);
          args.c = reinterpret_cast<float*>(kGuestC);
          args.key = nullptr;
          if (with_offset) args.col_offset = reinterpret_cast<const int32_t*>(kGuestColOffset);
          if (streams) {
            args.stream_src = reinterpret_cast<const void*>(kGuestStreamSrc);
            args.stream_dst = reinterpret_cast<void*>(kGuestStreamDst);
          }
          emulation::Case c;
          c.description = key.Name() + " panels=" + std::to_string(n_panels) +
                          " k_steps=" + std::to_string(k_steps) +
                          " accumulate=" + std::to_string(accumulate) +
                          " tail_cols=" + std::to_string(tail_cols);
          c.code = Bytes(gen->code(), gen->code_size());
          c.writes = {{kGuestA, Bytes(a.data(), a.size() * 4)},
                      {kGuestB, Bytes(b.data(), b.size() * 4)},
                      {kGuestC, Bytes(c_in.data(), c_in.size() * 4)},
                      {kGuestArgs, Bytes(&args, sizeof(args))}};
          if (with_offset) {
            c.description += " col_offset";
            c.writes.push_back({kGuestColOffset, Bytes(col_offset.data(), col_offset.size() * 4)});
          }
          // int8 quads: C holds int32 (the f32 small integers read as int32 bit patterns).
          c.checks = {{kGuestC, Bytes(want.data(), want.size() * 4),
                       key.layout == PanelLayout::kS8Quads ? "s32" : "f32", 0, {}}};
          if (streams) {
            c.description += " stream_iters=" + std::to_string(args.stream_iters) +
                             " stream_panels=" + std::to_string(args.stream_panels);
            c.writes.push_back({kGuestStreamSrc, Bytes(src.data(), src.size())});
            c.writes.push_back({kGuestStreamDst, Bytes(dst_in.data(), dst_in.size() * 4)});
            // Pairs bit for bit (as f32, a pair (0, -0) would pass for (0, 0)).
            c.checks.push_back({kGuestStreamDst, Bytes(dst_want.data(), dst_want.size() * 4),
                                pairs ? "s32" : "f32", 0, {}});
          }
          if (!writer.Add(c)) return false;
        }
      }
    }
  }
  return true;
}

}  // namespace
}  // namespace shardjit::backends::x86

int main(int argc, char** argv) {
  return shardjit::backends::x86::emulation::DumpMain(argc, argv, "dump_kernels",
                                                      shardjit::backends::x86::DumpMicroKernels);
}
