// The profiler end to end: a jit(shard_map(dot_general; psum)) run with profiling on writes a
// Chrome trace whose JSON parses, names every device, and holds kernel, collective and wait spans
// per device with sane, per-device ordered times.
#include "runtime/profiler.h"

#include <cctype>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "frontend/shardjit.h"
#include "gtest/gtest.h"
#include "runtime/overlap.h"

namespace shardjit {
namespace {

// A minimal JSON value and recursive-descent parser: enough to check the trace's structure.
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>,
               std::map<std::string, Json>>
      v;
  const Json& operator[](const std::string& key) const {
    static const Json kNull;
    const auto* obj = std::get_if<std::map<std::string, Json>>(&v);
    if (obj == nullptr) return kNull;
    auto it = obj->find(key);
    return it == obj->end() ? kNull : it->second;
  }
  const std::vector<Json>* array() const { return std::get_if<std::vector<Json>>(&v); }
  const std::string* str() const { return std::get_if<std::string>(&v); }
  const double* num() const { return std::get_if<double>(&v); }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  bool Parse(Json& out) {
    if (!Value(out)) return false;
    Skip();
    return i_ == s_.size();
  }

 private:
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Eat(char c) {
    Skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool String(std::string& out) {
    if (!Eat('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) return false;
        char c = s_[i_];
        if (c == 'u') {
          if (i_ + 4 >= s_.size()) return false;
          out += static_cast<char>(std::stoi(s_.substr(i_ + 1, 4), nullptr, 16));
          i_ += 4;
        } else {
          out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
      } else {
        out += s_[i_];
      }
      ++i_;
    }
    return Eat('"');
  }
  bool Value(Json& out) {
    Skip();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      std::map<std::string, Json> obj;
      if (!Eat('}')) {
        do {
          std::string key;
          Json value;
          if (!String(key) || !Eat(':') || !Value(value)) return false;
          obj[key] = std::move(value);
        } while (Eat(','));
        if (!Eat('}')) return false;
      }
      out.v = std::move(obj);
      return true;
    }
    if (c == '[') {
      ++i_;
      std::vector<Json> arr;
      if (!Eat(']')) {
        do {
          Json value;
          if (!Value(value)) return false;
          arr.push_back(std::move(value));
        } while (Eat(','));
        if (!Eat(']')) return false;
      }
      out.v = std::move(arr);
      return true;
    }
    if (c == '"') {
      std::string str;
      if (!String(str)) return false;
      out.v = std::move(str);
      return true;
    }
    for (const char* word : {"true", "false", "null"}) {
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        if (word[0] == 'n') {
          out.v = nullptr;
        } else {
          out.v = word[0] == 't';
        }
        return true;
      }
    }
    size_t used = 0;
    try {
      out.v = std::stod(s_.substr(i_, 32), &used);
    } catch (...) {
      return false;
    }
    i_ += used;
    return used > 0;
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ProfilerTest, ShardMapPsumTrace) {
  constexpr int kDevices = 4;
  Runtime rt({.num_devices = kDevices, .profile = true});
  ASSERT_NE(rt.profiler(), nullptr);
  Mesh mesh = *make_mesh(rt, {{"x", kDevices}});
  Tensor x_host = *random::normal(random::key(1), {8, 16}, DType::kF32);
  Tensor w_host = *random::normal(random::key(2), {16, 4}, DType::kF32);
  Array x = *device_put(x_host, NamedSharding(mesh, P(None, "x")));
  Array w = *device_put(w_host, NamedSharding(mesh, P("x", None)));
  auto f = jit(shard_map(
      [](Tracer x, Tracer w) {
        return lax::psum(lax::dot_general(x, w, DotDims{{1}, {0}}, DType::kF32), "x");
      },
      mesh, {P(None, "x"), P("x", None)}, {P()}, /*check_vma=*/false));
  absl::StatusOr<Array> out = f(x, w);
  ASSERT_TRUE(out.ok()) << out.status();

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/trace.json";
  ASSERT_TRUE(rt.profiler()->WriteChromeTrace(path).ok());
  Json trace;
  const std::string text = ReadFile(path);
  ASSERT_TRUE(Parser(text).Parse(trace)) << text;
  const std::vector<Json>* events = trace["traceEvents"].array();
  ASSERT_NE(events, nullptr);

  std::set<std::string> process_names;
  // Per device: the (category, name) pairs seen, and the last start time.
  std::map<int, std::set<std::pair<std::string, std::string>>> seen;
  std::map<int, double> last_ts;
  for (const Json& e : *events) {
    const std::string* ph = e["ph"].str();
    ASSERT_NE(ph, nullptr);
    ASSERT_NE(e["pid"].num(), nullptr);
    const int pid = static_cast<int>(*e["pid"].num());
    if (*ph == "M") {
      if (*e["name"].str() == "process_name") process_names.insert(*e["args"]["name"].str());
      continue;
    }
    ASSERT_EQ(*ph, "X");
    ASSERT_NE(e["name"].str(), nullptr);
    ASSERT_NE(e["cat"].str(), nullptr);
    ASSERT_NE(e["ts"].num(), nullptr);
    ASSERT_NE(e["dur"].num(), nullptr);
    EXPECT_EQ(*e["tid"].num(), 0);
    EXPECT_GE(*e["ts"].num(), 0);
    EXPECT_GE(*e["dur"].num(), 0);
    if (last_ts.count(pid)) {
      EXPECT_GE(*e["ts"].num(), last_ts[pid]) << "pid " << pid;
    }
    last_ts[pid] = *e["ts"].num();
    seen[pid].insert({*e["cat"].str(), *e["name"].str()});
  }
  for (int d = 0; d < kDevices; ++d) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(process_names.count("device " + std::to_string(d)));
    EXPECT_TRUE(seen[d].count({"kernel", "dot_general"}));
    EXPECT_TRUE(seen[d].count({"collective", "psum"}));
    EXPECT_TRUE(seen[d].count({"wait", "psum"}));
    EXPECT_TRUE(seen[d].count({"collective", "psum data"}));
  }
}

TEST(ProfilerTest, WaitSpansNestInsideTheirCollective) {
  Runtime rt({.num_devices = 2, .profile = true});
  Mesh mesh = *make_mesh(rt, {{"i", 2}});
  Array x = *device_put(*random::normal(random::key(3), {4, 8}, DType::kBF16),
                        NamedSharding(mesh, P("i", None)));
  auto f = jit(
      shard_map([](Tracer b) { return lax::psum(b, "i"); }, mesh, {P("i", None)}, {P(None, None)}, /*check_vma=*/false));
  ASSERT_TRUE(f(x).ok());
  std::map<int64_t, const runtime::Profiler::Event*> outer;
  std::vector<runtime::Profiler::Event> events = rt.profiler()->Events();
  int waits = 0;
  for (const auto& e : events) {
    if (e.category == "collective" && e.name == "psum") outer[e.device] = &e;
  }
  for (const auto& e : events) {
    if (e.category != "wait") continue;
    ++waits;
    ASSERT_TRUE(outer.count(e.device));
    EXPECT_GE(e.start_ns, outer[e.device]->start_ns);
    EXPECT_LE(e.start_ns + e.duration_ns,
              outer[e.device]->start_ns + outer[e.device]->duration_ns);
  }
  EXPECT_EQ(waits, 2);
}

// A collective-fusion ring: on each device, the transfer of a shard (a "transfer" span on the
// "transfers" track, from its start to its done) overlaps the product of the shard held then.
TEST(ProfilerTest, RingComputeOverlapsTheTransfersInFlight) {
  Runtime rt({.num_devices = 4, .profile = true});
  Mesh mesh = *make_mesh(rt, {{"i", 4}});
  Array x = *device_put(*random::normal(random::key(5), {64, 32}, DType::kBF16),
                        NamedSharding(mesh, P("i", None)));
  Array w = *device_put(*random::normal(random::key(6), {32, 16}, DType::kBF16),
                        NamedSharding(mesh, P()));
  JitOptions options;
  options.collective_fusion.ignore_time_model = true;
  auto f = jit(shard_map(
                   [](Tracer a, Tracer b) {
                     return lax::dot_general(lax::all_gather(a, "i", 0, true), b, DotDims{{1}, {0}},
                                             DType::kF32);
                   },
                   mesh, {P("i", None), P()}, {P()}, /*check_vma=*/false),
               options);
  ASSERT_TRUE(f(x, w).ok());
  std::vector<runtime::Profiler::Event> events = rt.profiler()->Events();
  for (int64_t d = 0; d < 4; ++d) {
    int transfers = 0, overlapped = 0;
    for (const auto& t : events) {
      if (t.device != d || t.category != "transfer") continue;
      EXPECT_EQ(t.name, "ppermute_start");
      ++transfers;
      for (const auto& k : events) {
        if (k.device == d && k.name == "dot_accumulate" && k.start_ns >= t.start_ns &&
            k.start_ns + k.duration_ns <= t.start_ns + t.duration_ns) {
          ++overlapped;
          break;
        }
      }
    }
    // A bidirectional ring of 4: two hops from the left, one from the right.
    EXPECT_EQ(transfers, 3) << "device " << d;
    EXPECT_EQ(overlapped, transfers) << "device " << d;
  }
  // The products ran while the shards travelled: some of the transfer time is hidden.
  runtime::CommunicationOverlap overlap = runtime::MeasureOverlap(events);
  EXPECT_GT(overlap.transfer_ns, 0);
  EXPECT_GT(overlap.hidden_ns, 0);
  EXPECT_LE(overlap.hidden_ns, overlap.transfer_ns);
  const std::string json = rt.profiler()->ChromeTraceJson();
  EXPECT_NE(json.find(R"("name":"thread_name","pid":0,"tid":1,"args":{"name":"transfers"})"),
            std::string::npos);
  EXPECT_NE(json.find(R"("cat":"transfer","pid":0,"tid":1)"), std::string::npos);
}

// Hand-made spans: device 0's transfer [100, 400) overlaps kernels [50, 150) and [200, 260)
// (which nests [210, 220)): 50 + 60 hidden; device 1's transfer [0, 100) overlaps nothing of its
// own (device 0's kernel [0, 40) does not count); a blocking psum of 30 with its data step and a
// host span count only as they should.
TEST(ProfilerTest, OverlapOfHandMadeSpans) {
  using E = runtime::Profiler::Event;
  std::vector<E> events = {
      {0, "dot", "kernel", "", 50, 100},
      {0, "dot", "kernel", "", 200, 60},
      {0, "add", "kernel", "", 210, 10},
      {0, "ppermute_start", "transfer", "", 100, 300},
      {0, "ppermute_start", "collective", "", 100, 5},
      {0, "ppermute_done", "collective", "", 390, 10},
      {0, "psum", "collective", "", 500, 30},
      {0, "psum data", "collective", "", 520, 10},
      {0, "axis_index", "collective", "", 540, 1},
      {1, "all_gather_start", "transfer", "", 0, 100},
      {0, "dot", "kernel", "", 0, 40},
      {runtime::Profiler::kHost, "x", "transfer", "", 0, 1000},
  };
  runtime::CommunicationOverlap o = runtime::MeasureOverlap(events);
  EXPECT_EQ(o.transfer_ns, 400);
  EXPECT_EQ(o.blocking_ns, 30);
  EXPECT_EQ(o.hidden_ns, 110);
  EXPECT_DOUBLE_EQ(o.hidden_share(), 110.0 / 430.0);
  EXPECT_EQ(runtime::MeasureOverlap({}).hidden_share(), 0.0);
}

TEST(ProfilerTest, EachProcessOfAJobHasItsOwnTraceFile) {
  EXPECT_EQ(runtime::ProcessTracePath("/tmp/t.json", 0, 1), "/tmp/t.json");
  EXPECT_EQ(runtime::ProcessTracePath("/tmp/t.json", 3, 4), "/tmp/t.p3.json");
  EXPECT_EQ(runtime::ProcessTracePath("trace", 1, 2), "trace.p1");
  EXPECT_EQ(runtime::ProcessTracePath("/a.b/trace", 1, 2), "/a.b/trace.p1");
}

TEST(ProfilerTest, OffByDefault) {
  Runtime rt({.num_devices = 2});
  if (std::getenv("SHARDJIT_PROFILE") == nullptr) {
    EXPECT_EQ(rt.profiler(), nullptr);
  }
}

}  // namespace
}  // namespace shardjit
