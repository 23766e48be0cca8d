#include "runtime/run_core.h"

#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/sharding.h"

namespace shardjit::runtime {

RunCore::RunCore(const ir::Mesh& mesh)
    : mesh_(mesh), size_(ir::MeshSize(mesh)), waiting_(size_) {}

int64_t RunCore::DeviceOf(int64_t position) const {
  return mesh_.device_ids_size() ? mesh_.device_ids(position) : position;
}

int RunCore::LocalMembers(const ir::CollectiveGroup& group) const {
  if (remote_ == nullptr) return static_cast<int>(group.members.size());
  int local = 0;
  for (int64_t member : group.members) local += remote_->IsLocal(member) ? 1 : 0;
  return local;
}

void RunCore::Cancel(const absl::Status& status, bool post) {
  bool first = false;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    first = !cancelled_;
    if (status_.ok()) status_ = status;
    cancelled_ = true;
    for (int64_t p = 0; p < size_; ++p) Wake(p);
  }
  if (post && first && remote_ != nullptr) remote_->PostFailure(status);
}

absl::Status RunCore::status() const {
  if (!cancelled_.load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<SpinMutex> lock(mu_);
  return status_;
}

absl::Status RunCore::CancelledError(int64_t position, const absl::Status& why) const {
  return absl::CancelledError(
      fmt::format("device {}: run cancelled: {}", DeviceOf(position), why.message()));
}

uint64_t RunCore::arrivals() const {
  std::lock_guard<SpinMutex> lock(mu_);
  return arrivals_;
}

}  // namespace shardjit::runtime
