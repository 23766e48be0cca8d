#include "tests/multiprocess_programs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "examples/decoder_block.h"
#include "examples/kernels/collective_matmul.h"
#include "examples/kernels/ring_all_gather.h"
#include "examples/seed_variants.h"
#include "examples/train_mlp.h"

namespace shardjit::multiprocess {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

int EnvInt(const char* name) {
  int v = 0;
  return absl::SimpleAtoi(Env(name), &v) ? v : 0;
}

// The job's mesh {x:2, y:n/2} over `rt`: row-major (x crosses processes when each process owns
// one row) or transposed device ids ("cols": y crosses processes, x stays within).
absl::StatusOr<Mesh> JobMesh(Runtime& rt, const std::string& layout) {
  const int64_t n = rt.num_devices();
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  if (layout == "cols") {  // position (x, y) runs device y * 2 + x
    for (int64_t x = 0; x < 2; ++x) {
      for (int64_t y = 0; y < n / 2; ++y) ids[x * (n / 2) + y] = y * 2 + x;
    }
  }
  return make_mesh(rt, {{"x", 2}, {"y", n / 2}}, ids);
}

// Compares every block this process holds with the one-process run's, bit for bit.
absl::Status SameBlocks(const std::vector<Array>& got, const std::vector<Array>& want,
                        const std::string& what) {
  if (got.size() != want.size()) return absl::InternalError(what + ": result counts differ");
  int64_t compared = 0;
  for (size_t r = 0; r < got.size(); ++r) {
    for (size_t p = 0; p < got[r].shards().size(); ++p) {
      const Tensor& a = got[r].shards()[p];
      if (!a.defined()) continue;
      const Tensor& b = want[r].shards()[p];
      if (a.type() != b.type() || std::memcmp(a.data(), b.data(), a.byte_size()) != 0) {
        return absl::InternalError(absl::StrCat(what, ": result ", r, " at mesh position ", p,
                                                " differs from the one-process run"));
      }
      ++compared;
    }
  }
  if (compared == 0) return absl::InternalError(what + ": no block compared");
  return absl::OkStatus();
}

// This process's part of the job's {x:2, y:2} mesh, and the same mesh run in one process.
struct JobAndOneProcess {
  explicit JobAndOneProcess(const std::shared_ptr<ProcessGroup>& group)
      : rt({.num_devices = std::max(1, EnvInt(kLocal)), .processes = group}),
        one({.num_devices = rt.num_devices(), .num_threads = rt.num_threads()}),
        mesh(JobMesh(rt, Env(kLayout))),
        mesh1(JobMesh(one, Env(kLayout))) {}
  absl::Status status() const { return !mesh.ok() ? mesh.status() : mesh1.status(); }
  Runtime rt, one;
  absl::StatusOr<Mesh> mesh, mesh1;
};

// Training (examples/train_mlp.h): 5 SGD steps of the tensor- and data-parallel MLP, the jitted
// gradient of its shard_map program, across the processes: every loss and the final weights
// equal, bit for bit, the same steps in one process; so does the gradient of the global-view
// decoder block (examples/decoder_block.h), partitioned from its weights' shardings.
absl::Status CheckTraining(const std::shared_ptr<ProcessGroup>& group) {
  JobAndOneProcess job(group);
  RETURN_IF_ERROR(job.status());
  const int64_t b = 8, d = 6, h = 8;
  const std::vector<std::pair<std::vector<int64_t>, PartitionSpec>> inputs = {
      {{d, h}, P(None, "y")},
      {{h, d}, P("y", None)},
      {{b, d}, P("x", None)},
      {{b, d}, P("x", None)}};
  std::vector<Array> state, state1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor host = *random::normal(random::key(31 + static_cast<int>(i)), inputs[i].first);
    for (const Mesh* on : {&*job.mesh, &*job.mesh1}) {
      absl::StatusOr<Array> a = device_put(host, NamedSharding(*on, inputs[i].second));
      if (!a.ok()) return a.status();
      (on == &*job.mesh ? state : state1).push_back(*a);
    }
  }
  auto step = jit(examples::MlpTrainStep(*job.mesh, 0.05f));
  auto step1 = jit(examples::MlpTrainStep(*job.mesh1, 0.05f));
  for (int s = 0; s < 5; ++s) {
    absl::StatusOr<std::vector<Array>> out = step.call(state);
    if (!out.ok()) return out.status();
    absl::StatusOr<std::vector<Array>> out1 = step1.call(state1);
    if (!out1.ok()) return out1.status();
    RETURN_IF_ERROR(SameBlocks(*out, *out1, absl::StrCat("training step ", s)));
    state = {(*out)[0], (*out)[1], state[2], state[3]};
    state1 = {(*out1)[0], (*out1)[1], state1[2], state1[3]};
  }
  // The decoder block's gradient, partitioned from its weights' shardings (global view).
  const int64_t heads = 4, model = 16, mlp = 24, seq = 4;
  auto grad_step = jit([heads](const std::vector<Tracer>& a) {
    auto loss = [heads](const std::vector<Tracer>& v) {
      Tracer y = examples::DecoderBlock(
          v[0], {v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]}, heads);
      return lax::reduce_sum(y * y, {0, 1, 2});
    };
    return value_and_grad(loss, {1, 2, 3, 4, 5, 6, 7, 8, 9})(a);
  });
  const std::vector<std::pair<std::vector<int64_t>, PartitionSpec>> block = {
      {{4, seq, model}, P("x", None, None)}, {{model}, P()},
      {{model, model}, P(None, "y")},       {{model, model}, P(None, "y")},
      {{model, model}, P(None, "y")},       {{model, model}, P("y", None)},
      {{model}, P()},                       {{model, mlp}, P(None, "y")},
      {{model, mlp}, P(None, "y")},         {{mlp, model}, P("y", None)}};
  std::vector<Array> args, args1;
  for (size_t i = 0; i < block.size(); ++i) {
    Tensor host = *random::normal(random::key(41 + static_cast<int>(i)), block[i].first);
    for (const Mesh* on : {&*job.mesh, &*job.mesh1}) {
      absl::StatusOr<Array> a = device_put(host, NamedSharding(*on, block[i].second));
      if (!a.ok()) return a.status();
      (on == &*job.mesh ? args : args1).push_back(*a);
    }
  }
  absl::StatusOr<std::vector<Array>> grads = grad_step.call(args);
  if (!grads.ok()) return grads.status();
  absl::StatusOr<std::vector<Array>> grads1 = grad_step.call(args1);
  if (!grads1.ok()) return grads1.status();
  return SameBlocks(*grads, *grads1, "decoder block gradient");
}

// Kernels that copy and signal between devices (seed 000's ring all-gather over either axis,
// seed 001's collective matmul kernel over x and, when even, y): bitwise equal to the same
// programs in one process, the gather equal to the array itself.
absl::Status CheckKernels(const std::shared_ptr<ProcessGroup>& group) {
  JobAndOneProcess job(group);
  RETURN_IF_ERROR(job.status());
  const Mesh* mesh = &*job.mesh;
  const Mesh* mesh1 = &*job.mesh1;
  for (const std::string axis : {"x", "y"}) {
    const int64_t n = mesh->axis_size(axis);
    Tensor host = *random::normal(random::key(21), {3 * n, 5});
    absl::StatusOr<Array> x = device_put(host, NamedSharding(*mesh, P(axis, None)));
    absl::StatusOr<Array> x1 = device_put(host, NamedSharding(*mesh1, P(axis, None)));
    if (!x.ok()) return x.status();
    if (!x1.ok()) return x1.status();
    const std::string what = "ring all-gather over " + axis;
    absl::StatusOr<Array> got = examples::RingAllGatherProgram(*mesh, axis)(*x);
    if (!got.ok()) return absl::Status(got.status().code(), what + ": " + got.status().ToString());
    absl::StatusOr<Array> want = examples::RingAllGatherProgram(*mesh1, axis)(*x1);
    if (!want.ok()) return want.status();
    if (absl::Status s = SameBlocks({*got}, {*want}, what); !s.ok()) return s;
    for (const Tensor& shard : got->shards()) {  // those of this process's devices
      if (shard.defined() && shard.ToDoubles() != host.ToDoubles()) {
        return absl::InternalError(what + ": a device's result is not the whole array");
      }
    }
    if (n % 2 != 0) continue;
    Tensor a = *random::normal(random::key(22), {5, 4 * n}, DType::kBF16);
    Tensor b = *random::normal(random::key(23), {4 * n, 6}, DType::kBF16);
    std::vector<Array> args, args1;
    for (const Mesh* on : {&*mesh, &*mesh1}) {
      absl::StatusOr<Array> xa = device_put(a, NamedSharding(*on, P(None, axis)));
      absl::StatusOr<Array> wb = device_put(b, NamedSharding(*on, P()));
      if (!xa.ok()) return xa.status();
      if (!wb.ok()) return wb.status();
      (on == &*mesh ? args : args1) = {*xa, *wb};
    }
    const std::string matmul = "collective matmul kernel over " + axis;
    absl::StatusOr<Array> product =
        (*examples::CollectiveMatmulKernelProgram(*mesh, axis))(args[0], args[1]);
    if (!product.ok()) {
      return absl::Status(product.status().code(), matmul + ": " + product.status().ToString());
    }
    absl::StatusOr<Array> product1 =
        (*examples::CollectiveMatmulKernelProgram(*mesh1, axis))(args1[0], args1[1]);
    if (!product1.ok()) return product1.status();
    if (absl::Status s = SameBlocks({*product}, {*product1}, matmul); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The seed notebook's matmul variants (examples/seed_variants.h), as compiled and as written, on
// the job's {x:2, y:2} mesh: every block bitwise equal to the one-process run's, and the gathered
// product within the variant's rounding of the f64 one (what seed_matmul --processes=N prints).
absl::Status CheckSeedVariants(const std::shared_ptr<ProcessGroup>& group) {
  JobAndOneProcess job(group);
  RETURN_IF_ERROR(job.status());
  const Mesh* mesh = &*job.mesh;
  const Mesh* mesh1 = &*job.mesh1;
  const int64_t m = 36, k = 52, n = 20;  // blocks of odd sizes: 18x26, 26x20
  Tensor x_host = *random::normal(random::key(11), {m, k}, DType::kBF16);
  Tensor w_host = *random::normal(random::key(12), {k, n}, DType::kBF16);
  std::vector<double> xd = x_host.ToDoubles(), wd = w_host.ToDoubles(), want(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += xd[i * k + p] * wd[p * n + j];
    }
  }
  std::vector<Array> args, args1;
  for (const Mesh* on : {&*mesh, &*mesh1}) {
    absl::StatusOr<Array> x = device_put(x_host, NamedSharding(*on, P("x", "y")));
    absl::StatusOr<Array> w = device_put(w_host, NamedSharding(*on, P("x", None)));
    if (!x.ok()) return x.status();
    if (!w.ok()) return w.status();
    (on == &*mesh ? args : args1) = {*x, *w};
  }
  for (bool fused : {true, false}) {
    std::set<std::string> disabled;
    if (!fused) disabled.insert("collective-fusion");
    std::vector<examples::SeedVariant> variants =
        examples::SeedVariants(*mesh, k, DefaultBackend(), disabled);
    std::vector<examples::SeedVariant> variants1 =
        examples::SeedVariants(*mesh1, k, DefaultBackend(), disabled);
    for (size_t v = 0; v < variants.size(); ++v) {
      const std::string what =
          absl::StrCat("variant (", variants[v].name, fused ? ") as compiled" : ") as written");
      absl::StatusOr<Array> got = variants[v].program(args[0], args[1]);
      if (!got.ok()) {
        return absl::Status(got.status().code(), what + ": " + got.status().ToString());
      }
      absl::StatusOr<Array> want1 = variants1[v].program(args1[0], args1[1]);
      if (!want1.ok()) return want1.status();
      if (absl::Status s = SameBlocks({*got}, {*want1}, what); !s.ok()) return s;
      absl::StatusOr<Tensor> product = process_allgather(*got);
      if (!product.ok()) return product.status();
      // Within a few bf16 roundings of the f64 product (f32 variants: far closer).
      const double tolerance = product->dtype() == DType::kF32 ? 1e-4 : 0.1;
      for (int64_t i = 0; i < m * n; ++i) {
        if (std::abs(product->GetDouble(i) - want[i]) > tolerance * (1 + std::abs(want[i]))) {
          return absl::InternalError(absl::StrCat(what, ": element ", i, " is ",
                                                  product->GetDouble(i), ", f64 gives ", want[i]));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shardjit::multiprocess
