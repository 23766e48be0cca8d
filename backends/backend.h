// A backend as the runtime and the frontend see it: it compiles per-device functions, runs the
// buffer reductions of the runtime's collectives, and says what machine plans for it are priced
// by. Implemented by the reference backend (backends/reference/backend.h) and the x86 backend
// (backends/x86/backend.h).
#ifndef SHARDJIT_BACKENDS_BACKEND_H_
#define SHARDJIT_BACKENDS_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "backends/reduce_kind.h"
#include "ir/dtype.h"
#include "ir/ir.pb.h"
#include "passes/machine_model.h"

namespace shardjit::backends {

class Executable;

class Backend {
 public:
  virtual ~Backend() = default;

  // "reference" or "x86": names the backend in profiles, logs and errors.
  virtual std::string_view name() const = 0;

  // Compiles `function` (verified) for one device.
  virtual absl::StatusOr<std::unique_ptr<Executable>> Compile(
      const ir::Function& function) const = 0;

  // out[i] = a[i] <kind> b[i] for i < n, f32 or bf16 (out may alias a or b): the step the
  // runtime's collectives (psum, psum_scatter, pmax, ...) reduce with. A floating max or min
  // returns a's NaN, else b's; ties keep b. By default ReduceBuffersInOrder.
  virtual absl::Status ReduceBuffers(ReduceKind kind, ir::DType dtype, const void* a,
                                     const void* b, void* out, int64_t n) const;

  // The machine model plans for this backend are priced by (passes/machine_model.h): the same
  // on every call in a process, and on one host from one process to the next.
  // By default the model's defaults.
  virtual const passes::MachineModel& machine_model() const;
};

// Backend::ReduceBuffers as a plain loop.
absl::Status ReduceBuffersInOrder(ReduceKind kind, ir::DType dtype, const void* a, const void* b,
                                  void* out, int64_t n);

}  // namespace shardjit::backends

#endif  // SHARDJIT_BACKENDS_BACKEND_H_
