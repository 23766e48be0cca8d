// Asynchronous collectives (JAX's `*_start` / `*_done` pairs): `X_start` takes X's operand and
// attributes and returns a future (ShapedType::future); exactly one `X_done`, in the region that
// holds the future, waits for it and returns what the blocking X returns. A future may also be
// carried through a fori_loop (its init and the body's result), so that a transfer started in
// one iteration is awaited in the next.
#ifndef SHARDJIT_IR_ASYNC_H_
#define SHARDJIT_IR_ASYNC_H_

#include <string>
#include <string_view>
#include <vector>

namespace shardjit::ir {

// The blocking collectives that have an asynchronous form, by their blocking opcode:
// all_gather, psum, psum_scatter, all_to_all, ppermute, pbroadcast.
const std::vector<std::string>& AsyncCollectives();

// For "ppermute_start" or "ppermute_done": "ppermute"; empty for any other opcode.
std::string_view AsyncBlockingOpcode(std::string_view opcode);
// The collective `opcode` performs: its blocking twin for a start or done, else itself.
std::string_view CollectiveKind(std::string_view opcode);
bool IsAsyncStart(std::string_view opcode);
bool IsAsyncDone(std::string_view opcode);
// psend / precv: point-to-point halves of a ppermute, matched per (source, target) pair in
// order rather than by the collective sequence; every one is a separate transfer (no two merge,
// and a psend stays even when its token is unused).
bool IsPointToPoint(std::string_view opcode);
// "ppermute" -> "ppermute_start" / "ppermute_done".
std::string AsyncStartOpcode(std::string_view blocking);
std::string AsyncDoneOpcode(std::string_view blocking);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_ASYNC_H_
