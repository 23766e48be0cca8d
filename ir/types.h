// ShapedType (ir/shaped_type.h) and its conversions to and from ir.proto types.
#ifndef SHARDJIT_IR_TYPES_H_
#define SHARDJIT_IR_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/ir.pb.h"
#include "ir/shaped_type.h"

namespace shardjit::ir {

ShapedType FromProto(const TensorType& t);
TensorType ToProto(const ShapedType& t);
inline DType FromProto(DTypeProto d) { return static_cast<DType>(d); }
inline DTypeProto ToProto(DType d) { return static_cast<DTypeProto>(d); }

// "{x:2, y:2}".
std::string MeshToString(const Mesh& mesh);
// "P(x, None)", "P((x,y), None)".
std::string SpecToString(const PartitionSpec& spec);

}  // namespace shardjit::ir

#endif  // SHARDJIT_IR_TYPES_H_
