#include "runtime/profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "fmt/format.h"

namespace shardjit::runtime {
namespace {

// `s` as the body of a JSON string.
std::string JsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

class Profiler::DeviceRecorder final : public base::SpanRecorder {
 public:
  DeviceRecorder(Profiler& profiler, int64_t device) : profiler_(profiler), device_(device) {}
  void Record(const base::Span& span) override { profiler_.Record(device_, span); }

 private:
  Profiler& profiler_;
  int64_t device_;
};

Profiler::Profiler(int num_devices)
    : num_devices_(num_devices), origin_ns_(base::SpanClockNs()) {
  for (int d = 0; d < num_devices; ++d) {
    recorders_.push_back(std::make_unique<DeviceRecorder>(*this, d));
  }
  recorders_.push_back(std::make_unique<DeviceRecorder>(*this, kHost));
}

Profiler::~Profiler() = default;

void Profiler::Record(int64_t device, const base::Span& span) {
  if (paused_.load(std::memory_order_relaxed)) return;
  Event e{device,         std::string(span.name),        std::string(span.category),
          std::string(span.name_scope), span.start_ns, span.duration_ns};
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

base::SpanRecorder* Profiler::ForDevice(int64_t device) {
  if (device == kHost) return recorders_.back().get();
  if (device < 0 || device >= num_devices_) return nullptr;
  return recorders_[device].get();
}

std::vector<Profiler::Event> Profiler::Events() const {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events = events_;
  }
  // Enclosing spans first when two start together (longer first), so viewers nest them.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.duration_ns > b.duration_ns;
  });
  return events;
}

void Profiler::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

std::string Profiler::ChromeTraceJson() const {
  std::vector<Event> events = Events();
  auto pid = [&](int64_t device) { return device == kHost ? num_devices_ : device; };
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& line) {
    if (!first) out += ",\n";
    first = false;
    out += line;
  };
  for (int d = 0; d <= num_devices_; ++d) {
    const std::string name = d == num_devices_ ? "host" : fmt::format("device {}", d);
    add(fmt::format(
        R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":"{}"}}}})", d,
        name));
    add(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,)"
                    R"("args":{{"sort_index":{}}}}})",
                    d, d));
    add(fmt::format(
        R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"transfers"}}}})", d,
        kTransferTid));
  }
  for (const Event& e : events) {
    std::string args = e.name_scope.empty()
                           ? "{}"
                           : fmt::format(R"({{"name_scope":"{}"}})", JsonEscape(e.name_scope));
    add(fmt::format(
        R"({{"ph":"X","name":"{}","cat":"{}","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{}}})",
        JsonEscape(e.name), JsonEscape(e.category), pid(e.device),
        e.category == "transfer" ? kTransferTid : 0,
        static_cast<double>(e.start_ns - origin_ns_) / 1e3,
        static_cast<double>(e.duration_ns) / 1e3, args));
  }
  out += "\n]}\n";
  return out;
}

absl::Status Profiler::WriteChromeTrace(const std::string& path) const {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::UnavailableError(fmt::format("profiler: cannot open {}", path));
  file << ChromeTraceJson();
  file.close();
  if (!file) return absl::DataLossError(fmt::format("profiler: cannot write {}", path));
  return absl::OkStatus();
}

std::string ProcessTracePath(const std::string& path, int process_id, int num_processes) {
  if (num_processes <= 1) return path;
  const size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
  return fmt::format("{}.p{}{}", path.substr(0, dot), process_id, path.substr(dot));
}

}  // namespace shardjit::runtime
