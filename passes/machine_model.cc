#include "passes/machine_model.h"

#include "ir/ir.pb.h"

namespace shardjit::passes {

ir::MachineModel MachineModel::ToProto() const {
  ir::MachineModel p;
  p.set_flops_per_second(flops_per_second);
  p.set_bytes_per_second(bytes_per_second);
  p.set_seconds_per_collective(seconds_per_collective);
  p.set_source(source);
  return p;
}

MachineModel MachineModel::FromProto(const ir::MachineModel& p) {
  return {p.flops_per_second(), p.bytes_per_second(), p.seconds_per_collective(), p.source()};
}

}  // namespace shardjit::passes
