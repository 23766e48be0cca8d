#include "tools/flags.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"

namespace shardjit::tools {
namespace {

// The status to exit with while absl::ParseCommandLine runs (it exits with 1 on a bad flag), or
// -1 outside it.
std::atomic<int> bad_flags_exit_status{-1};

// Runs among the atexit handlers: absl::ParseCommandLine called std::exit(1) on a bad flag.
void ExitWithBadFlagsStatus() {
  const int status = bad_flags_exit_status.exchange(-1);
  if (status < 0) return;
  std::fputs(std::string(absl::ProgramUsageMessage()).c_str(), stderr);
  std::fflush(nullptr);
  std::_Exit(status);
}

// The flag's name in "-name", "--name" or "--name=value".
std::string_view FlagName(std::string_view arg) {
  for (int i = 0; i < 2 && arg.starts_with('-'); ++i) arg.remove_prefix(1);
  return arg.substr(0, arg.find('='));
}

}  // namespace

std::vector<char*> ParseCommandLine(int argc, char** argv, int bad_flags_status) {
  bool absl_usage = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "-h" || arg == "-help" || arg == "--help") {
      std::fputs(std::string(absl::ProgramUsageMessage()).c_str(), stdout);
      std::exit(std::fflush(stdout) == 0 ? 0 : 1);
    }
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string_view name = FlagName(arg);
      absl_usage |= name.starts_with("help") || name == "version" || name == "only_check_args";
    }
  }
  static const bool registered = std::atexit(ExitWithBadFlagsStatus) == 0;
  // With a usage flag absl prints and exits by itself, with its own status.
  if (registered && !absl_usage) bad_flags_exit_status = bad_flags_status;
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  bad_flags_exit_status = -1;
  return positional;
}

}  // namespace shardjit::tools
