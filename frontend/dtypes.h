// JAX's type promotion: the dtype a binary operation on two dtypes (or on a dtype and a weakly
// typed Python-style scalar) computes in.
#ifndef SHARDJIT_FRONTEND_DTYPES_H_
#define SHARDJIT_FRONTEND_DTYPES_H_

#include "ir/dtype.h"

namespace shardjit::jnp {

using DType = ir::DType;

// jax.numpy.promote_types: the least upper bound of a and b in JAX's promotion lattice
//   pred < u8 < u16 < u32 < u64,  s8 < s16 < s32 < s64,  u8 < s16, u16 < s32, u32 < s64,
//   u64 and s64 < (any float) < bf16 and f16 < f32 < f64,
// so that mixing signed and unsigned promotes to the next wider signed type, u64 with a signed
// type to f64, bf16 with f16 to f32, and any integer with a float to that float.
DType promote_types(DType a, DType b);

// The kind of a weakly typed scalar (a C++ integer or floating-point literal).
enum class WeakKind { kInt, kFloat };

// The dtype of `x <op> c` for a tensor of dtype x and a weakly typed scalar c: x itself, unless
// c is a float and x is an integer or pred (f32) or c is an integer and x is pred (s32), the
// default dtypes jax uses for weak results.
DType promote_weak(DType x, WeakKind c);

}  // namespace shardjit::jnp

#endif  // SHARDJIT_FRONTEND_DTYPES_H_
