#include "ir/async.h"

#include <algorithm>

namespace shardjit::ir {
namespace {

constexpr std::string_view kStart = "_start";
constexpr std::string_view kDone = "_done";

// The blocking opcode of `opcode` when it ends in `suffix` and names an async collective.
std::string_view Strip(std::string_view opcode, std::string_view suffix) {
  if (opcode.size() <= suffix.size() || opcode.substr(opcode.size() - suffix.size()) != suffix) {
    return {};
  }
  std::string_view base = opcode.substr(0, opcode.size() - suffix.size());
  const std::vector<std::string>& all = AsyncCollectives();
  return std::find(all.begin(), all.end(), base) != all.end() ? base : std::string_view();
}

}  // namespace

const std::vector<std::string>& AsyncCollectives() {
  static const auto* names = new std::vector<std::string>{
      "all_gather", "psum", "psum_scatter", "all_to_all", "ppermute", "pbroadcast"};
  return *names;
}

std::string_view AsyncBlockingOpcode(std::string_view opcode) {
  std::string_view base = Strip(opcode, kStart);
  return base.empty() ? Strip(opcode, kDone) : base;
}

std::string_view CollectiveKind(std::string_view opcode) {
  std::string_view blocking = AsyncBlockingOpcode(opcode);
  return blocking.empty() ? opcode : blocking;
}

bool IsPointToPoint(std::string_view opcode) {
  return opcode == "psend" || opcode == "precv";
}

bool IsAsyncStart(std::string_view opcode) { return !Strip(opcode, kStart).empty(); }
bool IsAsyncDone(std::string_view opcode) { return !Strip(opcode, kDone).empty(); }

std::string AsyncStartOpcode(std::string_view blocking) {
  return std::string(blocking) + std::string(kStart);
}
std::string AsyncDoneOpcode(std::string_view blocking) {
  return std::string(blocking) + std::string(kDone);
}

}  // namespace shardjit::ir
