#include "runtime/overlap.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

#include "ir/prim.h"

namespace shardjit::runtime {
namespace {

using Interval = std::pair<int64_t, int64_t>;  // [start, end)

// The union of `intervals` as disjoint intervals in order.
std::vector<Interval> Union(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> merged;
  for (const Interval& i : intervals) {
    if (!merged.empty() && i.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, i.second);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

// Length of [start, end) covered by the disjoint, ordered `cover`.
int64_t Covered(const std::vector<Interval>& cover, int64_t start, int64_t end) {
  int64_t covered = 0;
  auto it = std::upper_bound(cover.begin(), cover.end(), Interval{start, start},
                             [](const Interval& a, const Interval& b) { return a.second < b.second; });
  for (; it != cover.end() && it->first < end; ++it) {
    covered += std::max<int64_t>(0, std::min(end, it->second) - std::max(start, it->first));
  }
  return covered;
}

// A blocking collective's outer span: not its data step (" data"), not an async start or done
// (their time is the transfer's), not a query of the mesh.
bool IsBlockingCollective(const Profiler::Event& e) {
  if (e.category != "collective") return false;
  const std::string_view name = e.name;
  // The event is named by its op's opcode (runtime/fabric.cc).
  const ir::Prim prim = ir::PrimFromName(name);
  return !name.ends_with(" data") && !ir::IsAsyncStart(prim) && !ir::IsAsyncDone(prim) &&
         prim != ir::Prim::kAxisIndex && prim != ir::Prim::kAxisSize;
}

}  // namespace

double CommunicationOverlap::hidden_share() const {
  const int64_t total = transfer_ns + blocking_ns;
  return total > 0 ? static_cast<double>(hidden_ns) / static_cast<double>(total) : 0.0;
}

CommunicationOverlap MeasureOverlap(const std::vector<Profiler::Event>& events) {
  std::map<int64_t, std::vector<Interval>> kernels, transfers;
  CommunicationOverlap overlap;
  for (const Profiler::Event& e : events) {
    if (e.device == Profiler::kHost) continue;
    const Interval span{e.start_ns, e.start_ns + e.duration_ns};
    if (e.category == "kernel") {
      kernels[e.device].push_back(span);
    } else if (e.category == "transfer") {
      transfers[e.device].push_back(span);
      overlap.transfer_ns += e.duration_ns;
    } else if (IsBlockingCollective(e)) {
      overlap.blocking_ns += e.duration_ns;
    }
  }
  for (const auto& [device, spans] : transfers) {
    const std::vector<Interval> busy = Union(kernels[device]);
    for (const Interval& t : spans) overlap.hidden_ns += Covered(busy, t.first, t.second);
  }
  return overlap;
}

}  // namespace shardjit::runtime
