// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0; little endian, C order)
// as ir::Tensor. Supported element types: float32 ('<f4'), int32 ('<i4'), bool ('|b1') and
// bfloat16. NumPy has no bfloat16 dtype of its own: ml_dtypes' bfloat16 is saved by np.save as
// '<V2' (raw 2-byte values), which is read as bf16; 'bfloat16' and 'bf16' descrs are accepted too.
// When writing, bf16 tensors become float32 ('<f4') files (exact: every bf16 value is an f32), so
// plain NumPy can read them.
#ifndef SHARDJIT_TOOLS_NPY_H_
#define SHARDJIT_TOOLS_NPY_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/tensor.h"

namespace shardjit::tools {

// Reads a .npy file into a host tensor; errors name the file and what is wrong (bad magic,
// malformed header, unsupported dtype, fortran order, truncated data).
absl::StatusOr<ir::Tensor> ReadNpy(const std::string& path);
// Writes `tensor` as a .npy file (bf16 as float32, see above).
absl::Status WriteNpy(const ir::Tensor& tensor, const std::string& path);

// The same on the bytes of a file.
absl::StatusOr<ir::Tensor> ParseNpy(std::string_view data);
std::string SerializeNpy(const ir::Tensor& tensor);

}  // namespace shardjit::tools

#endif  // SHARDJIT_TOOLS_NPY_H_
