// Emulator cases as files, for run_kernels.py. A case is a kernel's code, memory to write before
// the call (among it the arguments at kGuestArgs, whose address the kernel gets in rdi) and memory
// to compare after it. On disk: index.txt with a line "<id> <description>" per case, and per case
// a directory <id>/ with code.bin, the data files and case.txt:
//   write ADDRESS FILE
//   check ADDRESS FILE DTYPE MAX_ULP [OPEN_NAN_FILE]
// DTYPE is f32, bf16, s32 or u8. With MAX_ULP > 0, f32 and bf16 elements may differ by that many
// ulps and NaN matches NaN; OPEN_NAN_FILE has a byte per element, 1 where NaN matches any NaN.
#ifndef SHARDJIT_BACKENDS_X86_EMULATION_CASE_WRITER_H_
#define SHARDJIT_BACKENDS_X86_EMULATION_CASE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace shardjit::backends::x86::emulation {

// The guest memory map, shared with run_kernels.py: one page of arguments and data regions of
// kGuestDataBytes, each followed by an unmapped page.
inline constexpr uint64_t kGuestArgs = 0x50000000;
inline constexpr uint64_t kGuestData[] = {0x20000000, 0x30000000, 0x40000000, 0x80000000,
                                          0x90000000, 0xa0000000, 0xb0000000, 0xc0000000};
inline constexpr uint64_t kGuestDataBytes = 64 * 4096;

struct Case {
  struct Write {
    uint64_t address = 0;
    std::vector<uint8_t> bytes;
  };
  struct Check {
    uint64_t address = 0;
    std::vector<uint8_t> want;
    std::string dtype = "u8";
    int max_ulp = 0;
    std::vector<uint8_t> open_nan;  // empty, or one byte per element
  };
  std::string description;
  std::vector<uint8_t> code;
  std::vector<Write> writes;
  std::vector<Check> checks;
};

// A copy of `count_bytes` bytes at `data`.
inline std::vector<uint8_t> Bytes(const void* data, size_t count_bytes) {
  std::vector<uint8_t> bytes(count_bytes);
  if (count_bytes > 0) std::memcpy(bytes.data(), data, count_bytes);
  return bytes;
}

class CaseWriter {
 public:
  // Creates `dir` and its index.txt; ok() tells whether that worked.
  explicit CaseWriter(std::string dir);
  ~CaseWriter();

  bool ok() const { return index_ != nullptr; }
  int count() const { return count_; }
  // Writes one case; false on an I/O error.
  bool Add(const Case& c);

 private:
  std::string dir_;
  FILE* index_ = nullptr;
  int count_ = 0;
};

// The main function of a dump binary `name` whose one argument is the output directory: writes
// the cases that `dump` adds (false on failure, after saying why) and prints how many. Returns the
// exit status: 0, 1 on a failure, 2 on a usage error.
int DumpMain(int argc, char** argv, const char* name, bool (*dump)(CaseWriter& writer));

}  // namespace shardjit::backends::x86::emulation

#endif  // SHARDJIT_BACKENDS_X86_EMULATION_CASE_WRITER_H_
