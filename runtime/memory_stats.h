// MemoryStats: a device's current and peak bytes (runtime/device.h accounts them).
#ifndef SHARDJIT_RUNTIME_MEMORY_STATS_H_
#define SHARDJIT_RUNTIME_MEMORY_STATS_H_

#include <cstdint>

namespace shardjit::runtime {

struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_MEMORY_STATS_H_
