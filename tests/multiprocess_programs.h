// The programs the multiprocess test's children run and compare with one process (seed
// variants, user kernels, training), and what the children share: the job's environment, its
// mesh and the bitwise comparison of blocks.
#ifndef SHARDJIT_TESTS_MULTIPROCESS_PROGRAMS_H_
#define SHARDJIT_TESTS_MULTIPROCESS_PROGRAMS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/shardjit.h"

namespace shardjit::multiprocess {

// Environment variables the parent sets for a child: its local device count and the mesh layout.
inline constexpr char kLocal[] = "SHARDJIT_TEST_LOCAL_DEVICES";
inline constexpr char kLayout[] = "SHARDJIT_TEST_LAYOUT";

std::string Env(const char* name);
int EnvInt(const char* name);

// The job's mesh {x:2, y:n/2} over `rt`: row-major (x crosses processes when each process owns
// one row) or transposed device ids ("cols": y crosses processes, x stays within).
absl::StatusOr<Mesh> JobMesh(Runtime& rt, const std::string& layout);

// Compares every block this process holds with the one-process run's, bit for bit.
absl::Status SameBlocks(const std::vector<Array>& got, const std::vector<Array>& want,
                        const std::string& what);

// The checks of the "training", "kernels" and "seed" roles.
absl::Status CheckTraining(const std::shared_ptr<ProcessGroup>& group);
absl::Status CheckKernels(const std::shared_ptr<ProcessGroup>& group);
absl::Status CheckSeedVariants(const std::shared_ptr<ProcessGroup>& group);

}  // namespace shardjit::multiprocess

#endif  // SHARDJIT_TESTS_MULTIPROCESS_PROGRAMS_H_
