// How much of a trace's communication was hidden behind compute: the figure collective fusion
// is judged by. Communication is the time asynchronous collectives were in flight ("transfer"
// spans, from start to done) plus the time devices spent in blocking collectives (their outer
// "collective" spans); hidden is the part of the transfers during which their device ran kernels
// ("kernel" spans). Blocking collectives are never hidden.
#ifndef SHARDJIT_RUNTIME_OVERLAP_H_
#define SHARDJIT_RUNTIME_OVERLAP_H_

#include <cstdint>
#include <vector>

#include "runtime/profiler.h"

namespace shardjit::runtime {

struct CommunicationOverlap {
  int64_t transfer_ns = 0;  // asynchronous collectives in flight, summed over devices
  int64_t blocking_ns = 0;  // blocking collectives, summed over devices
  int64_t hidden_ns = 0;    // transfer time during which the same device ran kernels
  // hidden / (transfer + blocking); 0 without communication.
  double hidden_share() const;
};

// Over the events of every device (the host's are ignored).
CommunicationOverlap MeasureOverlap(const std::vector<Profiler::Event>& events);

}  // namespace shardjit::runtime

#endif  // SHARDJIT_RUNTIME_OVERLAP_H_
