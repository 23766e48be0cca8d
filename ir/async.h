// Asynchronous collectives (JAX's `*_start` / `*_done` pairs): `X_start` takes X's operand and
// attributes and returns a future (ShapedType::future); exactly one `X_done`, in the region that
// holds the future, waits for it and returns what the blocking X returns. A future may also be
// carried through a fori_loop (its init and the body's result), so that a transfer started in
// one iteration is awaited in the next.
//
// Which collectives have the pair, and the questions code asks of an op (IsAsyncStart,
// IsAsyncDone, AsyncBlocking, CollectiveKind, AsyncStartOf/AsyncDoneOf, IsPointToPoint), are on
// ir::Prim (ir/prim.h: kAsyncCollectives). Here: the opcode text, for building ops by name.
#ifndef SHARDJIT_IR_ASYNC_H_
#define SHARDJIT_IR_ASYNC_H_

#include <string>
#include <string_view>

#include "ir/prim.h"

namespace shardjit::ir {

// "ppermute" -> "ppermute_start" / "ppermute_done".
std::string AsyncStartOpcode(std::string_view blocking);
std::string AsyncDoneOpcode(std::string_view blocking);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_ASYNC_H_
