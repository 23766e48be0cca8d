#include "examples/kernels/blocked_matmul.h"

namespace shardjit::examples {

pl::PallasCall BlockedMatmul(int64_t m, int64_t k, int64_t n, MatmulBlocks b, DType out_dtype) {
  const bool mask_k = k % b.bk != 0;
  return pl::pallas_call(
      [=](pl::Ref x, pl::Ref y, pl::Ref o, pl::Ref acc) {
        Tracer kk = pl::program_id(2);
        pl::when(lax::eq(kk, lax::scalar(0, DType::kS32)),
                 [&] { acc.store(lax::full({b.bm, b.bn}, 0, DType::kF32)); });
        Tracer xs = x.load();
        Tracer ys = y.load();
        if (mask_k) {
          // Columns of x and rows of y past k hold NaN padding in the last k block.
          Tracer limit = lax::scalar(static_cast<double>(k), DType::kS32) - kk * b.bk;
          xs = lax::select(lax::broadcasted_iota(DType::kS32, {b.bm, b.bk}, 1) < limit, xs,
                           lax::full({b.bm, b.bk}, 0, xs.dtype()));
          ys = lax::select(lax::broadcasted_iota(DType::kS32, {b.bk, b.bn}, 0) < limit, ys,
                           lax::full({b.bk, b.bn}, 0, ys.dtype()));
        }
        acc.store(acc.load() + pl::dot(xs, ys, DType::kF32));
        pl::when(lax::eq(kk, pl::num_programs(2) - 1),
                 [&] { o.store(lax::convert_element_type(acc.load(), out_dtype)); });
      },
      {.out_shapes = {{out_dtype, {m, n}}},
       .grid = {pl::cdiv(m, b.bm), pl::cdiv(n, b.bn), pl::cdiv(k, b.bk)},
       .in_specs = {pl::BlockSpec({b.bm, b.bk}, [](pl::Idx g) { return pl::Blocks{g[0], g[2]}; }),
                    pl::BlockSpec({b.bk, b.bn}, [](pl::Idx g) { return pl::Blocks{g[2], g[1]}; })},
       .out_specs = {pl::BlockSpec({b.bm, b.bn}, [](pl::Idx g) { return pl::Blocks{g[0], g[1]}; })},
       .scratch_shapes = {{DType::kF32, {b.bm, b.bn}}},
       .dimension_semantics = {pl::kParallel, pl::kParallel, pl::kArbitrary},
       .name = "matmul"});
}

}  // namespace shardjit::examples
