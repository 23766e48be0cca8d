#include "ir/async.h"

namespace shardjit::ir {

std::string AsyncStartOpcode(std::string_view blocking) {
  return std::string(blocking) + "_start";
}
std::string AsyncDoneOpcode(std::string_view blocking) {
  return std::string(blocking) + "_done";
}

}  // namespace shardjit::ir
