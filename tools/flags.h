// Command-line parsing for the tools: absl flags (ABSL_FLAG, absl::ParseCommandLine) with the
// tools' own exit statuses. absl::ParseCommandLine exits with status 1 on a flag it cannot parse
// (unknown, or a value its type does not take) and on --help; for irdump and irrun 1 means bad
// input and for launch a failed process, so here a bad flag exits with the tool's status for bad
// flags instead (after absl's "ERROR: ..." line and the usage message, on stderr), and --help
// (-h) prints the usage message (absl::SetProgramUsageMessage) to stdout and exits 0. absl's other
// usage flags (--helpfull, --helpshort, --help=SUBSTRING, --version) work as absl has them.
#ifndef SHARDJIT_TOOLS_FLAGS_H_
#define SHARDJIT_TOOLS_FLAGS_H_

#include <vector>

namespace shardjit::tools {

// Sets the flags named in argv[1..argc) (up to "--"); returns argv[0] and the positional
// arguments, those after "--" included. Set the usage message first.
std::vector<char*> ParseCommandLine(int argc, char** argv, int bad_flags_status);

}  // namespace shardjit::tools

#endif  // SHARDJIT_TOOLS_FLAGS_H_
