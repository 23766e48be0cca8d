#include "runtime/run_options.h"

#include <utility>

namespace shardjit::runtime {

void CancellationToken::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.store(true, std::memory_order_release);
  for (auto& [id, on_cancel] : subscribers_) on_cancel();
}

int64_t CancellationToken::Subscribe(std::function<void()> on_cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled()) on_cancel();
  const int64_t id = next_id_++;
  subscribers_.emplace(id, std::move(on_cancel));
  return id;
}

void CancellationToken::Unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
}

}  // namespace shardjit::runtime
