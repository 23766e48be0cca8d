#include "backends/kernel_peers.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/sharding.h"
#include "ir/types.h"

namespace shardjit::backends {
namespace {
thread_local KernelPeers* current_peers = nullptr;
}  // namespace

KernelPeers* CurrentKernelPeers() { return current_peers; }
ScopedKernelPeers::ScopedKernelPeers(KernelPeers* peers) { current_peers = peers; }
ScopedKernelPeers::~ScopedKernelPeers() { current_peers = nullptr; }

absl::StatusOr<int64_t> TargetPosition(const ir::Mesh& mesh, int64_t self,
                                       const std::vector<std::string>& axes, bool logical,
                                       const std::vector<int64_t>& values,
                                       std::string_view where) {
  if (values.empty()) return self;
  const int64_t size = ir::MeshSize(mesh);
  if (mesh.axes_size() == 0) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: names device ({}) but the kernel runs on one device, outside any mesh (run it "
        "in shard_map)",
        where, absl::StrJoin(values, ",")));
  }
  if (logical) {
    if (values[0] < 0 || values[0] >= size) {
      return absl::OutOfRangeError(fmt::format(
          "{}: logical device id {} is outside the mesh {} of {} devices", where, values[0],
          ir::MeshToString(mesh), size));
    }
    return values[0];
  }
  std::vector<int64_t> coords = ir::MeshCoords(mesh, self);
  std::vector<std::string> named;
  for (size_t i = 0; i < axes.size(); ++i) {
    named.push_back(fmt::format("{}={}", axes[i], values[i]));
    int a = 0;
    while (a < mesh.axes_size() && mesh.axes(a).name() != axes[i]) ++a;
    if (a == mesh.axes_size()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: device ({}) names axis \"{}\", not an axis of the mesh {}", where,
          absl::StrJoin(named, ", "), axes[i], ir::MeshToString(mesh)));
    }
    coords[a] = values[i];
  }
  for (int a = 0; a < mesh.axes_size(); ++a) {
    if (coords[a] < 0 || coords[a] >= mesh.axes(a).size()) {
      return absl::OutOfRangeError(fmt::format(
          "{}: device ({}) is outside the mesh {}: coordinate {} along axis \"{}\"", where,
          absl::StrJoin(named, ", "), ir::MeshToString(mesh), coords[a], mesh.axes(a).name()));
    }
  }
  return ir::MeshPosition(mesh, coords);
}

int64_t WindowCopy::bytes() const {
  int64_t n = elem;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {

// Copies dimensions [d, rank) of the window; the last runs as one memcpy when both sides are
// contiguous along it.
void CopyDims(const WindowCopy& c, size_t d, const char* src, char* dst) {
  const size_t rank = c.dims.size();
  if (d == rank) {
    std::memcpy(dst, src, c.elem);
    return;
  }
  const int64_t sf = c.from.strides[d] * c.elem, st = c.to.strides[d] * c.elem;
  if (d + 1 == rank && c.from.strides[d] == 1 && c.to.strides[d] == 1) {
    std::memcpy(dst, src, c.dims[d] * c.elem);
    return;
  }
  for (int64_t i = 0; i < c.dims[d]; ++i) CopyDims(c, d + 1, src + i * sf, dst + i * st);
}

}  // namespace

void CopyWindow(const WindowCopy& copy, void* dst) {
  for (int64_t d : copy.dims) {
    if (d == 0) return;
  }
  CopyDims(copy, 0, static_cast<const char*>(copy.src) + copy.from.offset * copy.elem,
           static_cast<char*>(dst) + copy.to.offset * copy.elem);
}

absl::Status StartDma(KernelPeers& peers, int64_t target, const WindowCopy& copy,
                      void* local_dst, int dst_param, SemaphoreSlot dst_sem,
                      const SemaphoreSlot* src_sem, std::string_view where) {
  if (target == peers.position()) {
    // A copy on this device writes the ref itself (a block included).
    CopyWindow(copy, local_dst);
    RETURN_IF_ERROR(peers.Signal(target, dst_sem, copy.bytes(), where));
  } else {
    RETURN_IF_ERROR(peers.CopyTo(target, dst_param, copy, dst_sem, where));
  }
  // The copy has left this device (its bytes are in the peer's buffer or in a message).
  if (src_sem != nullptr) {
    RETURN_IF_ERROR(peers.Signal(peers.position(), *src_sem, copy.bytes(), where));
  }
  return absl::OkStatus();
}

SemaphoreValues::SemaphoreValues(const std::vector<KernelBuffer>& buffers) {
  for (const KernelBuffer& b : buffers) {
    values_.emplace_back(b.type.semaphore != ir::Semaphore::kNone ? b.type.num_elements() : 0,
                         0);
  }
}

int64_t* SemaphoreValues::Find(SemaphoreSlot sem) {
  if (sem.param < 0 || sem.param >= static_cast<int>(values_.size())) return nullptr;
  std::vector<int64_t>& v = values_[sem.param];
  if (sem.index < 0 || sem.index >= static_cast<int64_t>(v.size())) return nullptr;
  return &v[sem.index];
}

absl::Status LocalKernelPeers::Enter(const ir::Op&, std::vector<KernelBuffer> buffers) {
  semaphores_.emplace(buffers);
  buffers_ = std::move(buffers);
  return absl::OkStatus();
}

void LocalKernelPeers::Exit(const absl::Status&) {
  semaphores_.reset();
  buffers_.clear();
}

absl::Status LocalKernelPeers::CopyTo(int64_t target, int param, const WindowCopy& copy,
                                      SemaphoreSlot sem, std::string_view where) {
  if (target != 0 || param < 0 || param >= static_cast<int>(buffers_.size()) ||
      buffers_[param].data == nullptr) {
    return absl::InternalError(fmt::format("{}: no buffer {} on device {}", where, param, target));
  }
  CopyWindow(copy, buffers_[param].data);
  return Signal(target, sem, copy.bytes(), where);
}

absl::Status LocalKernelPeers::Signal(int64_t target, SemaphoreSlot sem, int64_t inc,
                                      std::string_view where) {
  int64_t* v = semaphores_ ? semaphores_->Find(sem) : nullptr;
  if (target != 0 || v == nullptr) {
    return absl::InternalError(
        fmt::format("{}: no semaphore {}[{}] on device {}", where, sem.param, sem.index, target));
  }
  *v += inc;
  return absl::OkStatus();
}

absl::Status LocalKernelPeers::Wait(SemaphoreSlot sem, int64_t n, std::string_view where,
                                    std::string_view what) {
  int64_t* v = semaphores_ ? semaphores_->Find(sem) : nullptr;
  if (v == nullptr) {
    return absl::InternalError(fmt::format("{}: no semaphore {}[{}]", where, sem.param, sem.index));
  }
  if (*v < n) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: waits for {} on {}, which holds {}; the kernel runs alone, so nothing else can "
        "signal it",
        where, n, what, *v));
  }
  *v -= n;
  return absl::OkStatus();
}

int64_t LocalKernelPeers::Read(SemaphoreSlot sem) {
  int64_t* v = semaphores_ ? semaphores_->Find(sem) : nullptr;
  return v != nullptr ? *v : 0;
}

}  // namespace shardjit::backends
