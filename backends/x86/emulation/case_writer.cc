#include "backends/x86/emulation/case_writer.h"

#include <sys/stat.h>

#include <utility>

namespace shardjit::backends::x86::emulation {
namespace {

bool WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

std::string Hex(uint64_t address) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

}  // namespace

CaseWriter::CaseWriter(std::string dir) : dir_(std::move(dir)) {
  mkdir(dir_.c_str(), 0755);
  index_ = std::fopen((dir_ + "/index.txt").c_str(), "w");
}

CaseWriter::~CaseWriter() {
  if (index_ != nullptr) std::fclose(index_);
}

bool CaseWriter::Add(const Case& c) {
  const std::string dir = dir_ + "/" + std::to_string(count_);
  mkdir(dir.c_str(), 0755);
  std::string manifest;
  bool ok = WriteFile(dir + "/code.bin", c.code);
  for (size_t i = 0; i < c.writes.size(); ++i) {
    const std::string file = "write" + std::to_string(i) + ".bin";
    ok = ok && WriteFile(dir + "/" + file, c.writes[i].bytes);
    manifest += "write " + Hex(c.writes[i].address) + " " + file + "\n";
  }
  for (size_t i = 0; i < c.checks.size(); ++i) {
    const Case::Check& check = c.checks[i];
    const std::string file = "want" + std::to_string(i) + ".bin";
    ok = ok && WriteFile(dir + "/" + file, check.want);
    manifest += "check " + Hex(check.address) + " " + file + " " + check.dtype + " " +
                std::to_string(check.max_ulp);
    if (!check.open_nan.empty()) {
      const std::string open = "open_nan" + std::to_string(i) + ".bin";
      ok = ok && WriteFile(dir + "/" + open, check.open_nan);
      manifest += " " + open;
    }
    manifest += "\n";
  }
  ok = ok && WriteFile(dir + "/case.txt", std::vector<uint8_t>(manifest.begin(), manifest.end()));
  ok = ok && std::fprintf(index_, "%d %s\n", count_, c.description.c_str()) > 0;
  ++count_;
  return ok;
}

int DumpMain(int argc, char** argv, const char* name, bool (*dump)(CaseWriter& writer)) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", name);
    return 2;
  }
  const std::string out = argv[1];
  CaseWriter writer(out);
  if (!writer.ok() || !dump(writer)) return 1;
  std::printf("%d cases in %s\n", writer.count(), out.c_str());
  return 0;
}

}  // namespace shardjit::backends::x86::emulation
