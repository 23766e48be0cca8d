// End-to-end tests of running module files: RunModule on per-device and global-view modules
// (hand-written IR text and modules lowered by jit), its error messages, and the irrun binary.
#include "tools/run_module.h"

#include <sys/wait.h>

#include <cstdlib>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/shardjit.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/autodiff.h"
#include "ir/io.h"
#include "ir/parser.h"
#include "tools/npy.h"

namespace shardjit::tools {
namespace {

using ::testing::HasSubstr;

// psum over x of the local blocks of a f32[4,3] array split by rows over {x:2}.
constexpr char kPsumModule[] = R"(module psum_x [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) result_shardings=(P())]
func main = { lambda ; a:f32[2,3]. let
    b:f32[2,3] = psum[axes=(x)] a
  in (b) }
)";

// A psum over x in a loop of 2^40 trips (hours), per device; and the same loop, without the
// psum, in a global-view module.
constexpr char kForeverPerDevice[] = R"(module forever [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) result_shardings=(P(x))]
func main = { lambda ; a:f32[2,3]. let
    e:f32[2,3] = fori_loop[lower=0 upper=2147483647 body={ lambda ; b:s32[] c:f32[2,3]. let
          d:f32[2,3] = psum[axes=(x)] c
        in (d) }] a
  in (e) }
)";
constexpr char kForeverGlobal[] = R"(module forever [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=(P()) result_shardings=(P())]
func main = { lambda ; a:f32[4,3]. let
    e:f32[4,3] = fori_loop[lower=0 upper=2147483647 body={ lambda ; b:s32[] c:f32[4,3]. let
          d:f32[4,3] = add c a
        in (d) }] a
  in (e) }
)";

// A kernel written as IR text: out = 2 * x + program_id over blocks of 4 rows of f32[6,4] (the
// second block overhangs the array: its writes past row 5 are dropped).
constexpr char kKernelModule[] = R"(module scale [view=global mesh={x:1} devices=(0) entry=main param_shardings=(P()) result_shardings=(P())]
func main = { lambda ; a:f32[6,4]. let
    b:f32[6,4] = pallas_call[name=scale grid=(2) in_specs=(((4,4),{ lambda ; c:s32[]. let
          z:s32[] = constant[dtype=s32 value=(0)]
        in (c, z) })) out_specs=(((4,4),{ lambda ; d:s32[]. let
          y:s32[] = constant[dtype=s32 value=(0)]
        in (d, y) })) out_shapes=(f32[6,4]) kernel={ lambda ; e:ref[f32[4,4]] f:ref[f32[4,4]]. let
          g:s32[] = constant[dtype=s32 value=(0)]
          h:f32[4,4] = ref_load[sizes=(4,4)] e g g
          i:f32[4,4] = add h h
          j:s32[] = program_id[axis=0]
          k:f32[] = convert_element_type[new_dtype=f32] j
          l:f32[4,4] = broadcast_in_dim[shape=(4,4) broadcast_dimensions=()] k
          m:f32[4,4] = add i l
          _ = ref_store[sizes=(4,4)] f m g g
        in () }] a
  in (b) }
)";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::vector<double> Iota(int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

Tensor F32(std::vector<int64_t> dims, const std::vector<double>& values) {
  return Tensor::FromDoubles({DType::kF32, std::move(dims)}, values);
}

TEST(RunModuleTest, HandWrittenPerDeviceModule) {
  absl::StatusOr<ir::Module> module = ir::ParseModule(kPsumModule);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<GlobalSignature> sig = ModuleGlobalSignature(*module);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->params[0].ToString(), "f32[4,3]");
  EXPECT_EQ(sig->results[0].ToString(), "f32[2,3]");

  absl::StatusOr<std::vector<Tensor>> out = RunModule(*module, {F32({4, 3}, Iota(12))});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].type().ToString(), "f32[2,3]");
  // Rows 0-1 plus rows 2-3.
  EXPECT_EQ((*out)[0].ToDoubles(), (std::vector<double>{6, 8, 10, 12, 14, 16}));
}

TEST(RunModuleTest, HandWrittenKernelModule) {
  absl::StatusOr<ir::Module> module = ir::ParseModule(kKernelModule);
  ASSERT_TRUE(module.ok()) << module.status();
  for (Backend backend : {Backend::kReference, Backend::kX86}) {
    absl::StatusOr<std::vector<Tensor>> out =
        RunModule(*module, {F32({6, 4}, Iota(24))}, 0, {}, {}, backend);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> want(24);
    for (int i = 0; i < 24; ++i) want[i] = 2 * i + (i >= 16 ? 1 : 0);
    EXPECT_EQ((*out)[0].ToDoubles(), want);
  }
}

// Two devices swap their blocks by a remote copy written in IR text.
TEST(RunModuleTest, HandWrittenRemoteCopyModule) {
  constexpr char kText[] = R"(module swap [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) result_shardings=(P(x))]
func main = { lambda ; a:f32[2]. let
    b:f32[2] = pallas_call[name=swap in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[2]) kernel={ lambda ; c:ref[f32[2]] d:ref[f32[2]] e:ref[dma_sem[]] f:ref[dma_sem[]]. let
          g:s32[] = axis_index[axes=(x)]
          h:s32[] = constant[dtype=s32 value=(1)]
          i:s32[] = sub h g
          j:s32[] = constant[dtype=s32 value=(0)]
          _ = dma_start[src_sizes=(2) dst_sizes=(2) has_src_sem=True device_axes=(x)] c j d j f e i
          _ = dma_wait[bytes=8] e
          _ = dma_wait[bytes=8] f
        in () }] a
  in (b) }
)";
  absl::StatusOr<ir::Module> module = ir::ParseModule(kText);
  ASSERT_TRUE(module.ok()) << module.status();
  for (Backend backend : {Backend::kReference, Backend::kX86}) {
    absl::StatusOr<std::vector<Tensor>> out =
        RunModule(*module, {F32({4}, {1, 2, 3, 4})}, 0, {}, {}, backend);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].ToDoubles(), (std::vector<double>{3, 4, 1, 2}));
  }
}

// A custom VJP (the rule gives 3 cos, not the derivative cos) and a checkpoint, written as IR
// text in a global-view module: the module runs its functions; its VJP uses the rule and
// recomputes the checkpointed body.
TEST(RunModuleTest, HandWrittenCustomDerivativesModule) {
  constexpr char kText[] = R"(module c [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) result_shardings=(P())]
func main = { lambda ; a:f32[4,3]. let
    h:f32[4,3] = custom_vjp_call[fun={ lambda ; b:f32[4,3]. let
          c:f32[4,3] = sin b
        in (c) } fwd={ lambda ; d:f32[4,3]. let
          e:f32[4,3] = sin d
          f:f32[4,3] = cos d
        in (e, f) } bwd={ lambda ; i:f32[4,3] j:f32[4,3]. let
          k:f32[4,3] = mul i j
          l:f32[] = constant[dtype=f32 value=(3)]
          m:f32[4,3] = broadcast_in_dim[shape=(4,3) broadcast_dimensions=()] l
          n:f32[4,3] = mul k m
        in (n) }] a
    q:f32[4,3] = checkpoint[body={ lambda ; o:f32[4,3]. let
          p:f32[4,3] = mul o o
        in (p) } prevent_cse=True] h
    r:f32[] = reduce_sum[axes=(0,1)] q
  in (r) }
)";
  absl::StatusOr<ir::Module> module = ir::ParseModule(kText);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<ir::Module> vjp = ir::TransformModule(*module, ir::AdTransform::kVjp);
  ASSERT_TRUE(vjp.ok()) << vjp.status();
  std::vector<double> xs = Iota(12);
  for (double& v : xs) v = 0.4 * v - 2;
  for (Backend backend : {Backend::kReference, Backend::kX86}) {
    absl::StatusOr<std::vector<Tensor>> out =
        RunModule(*module, {F32({4, 3}, xs)}, 0, {}, {}, backend);
    ASSERT_TRUE(out.ok()) << out.status();
    double want = 0;
    for (double x : xs) want += std::sin(static_cast<float>(x)) * std::sin(static_cast<float>(x));
    EXPECT_NEAR((*out)[0].GetDouble(0), want, 1e-5);
    absl::StatusOr<std::vector<Tensor>> grads = RunModule(
        *vjp, {F32({4, 3}, xs), Tensor::FromDoubles({ir::DType::kF32, {}}, {1.0})}, 0, {}, {},
        backend);
    ASSERT_TRUE(grads.ok()) << grads.status();
    ASSERT_EQ(grads->size(), 2u);
    for (int i = 0; i < 12; ++i) {
      const double a = static_cast<float>(xs[i]);
      EXPECT_NEAR((*grads)[1].GetDouble(i), 2 * std::sin(a) * std::cos(a) * 3, 1e-5) << i;
    }
  }
}

TEST(RunModuleTest, MpmdModuleRunsAFunctionPerPosition) {
  constexpr char kText[] = R"(module pipe [view=per_device mesh={s:2} devices=(0,1) entry=send param_shardings=(P(s)) result_shardings=(P(s)) position_functions=(send,recv)]
func send = { lambda ; a:f32[2]. let
    b:f32[2] = mul a a
    c:pred[0] = psend[axes=(s) perm=((0,1))] b
  in (a) }
func recv = { lambda ; a:f32[2]. let
    b:pred[0] = constant[dtype=pred shape=(0)]
    c:f32[2] = precv[axes=(s) perm=((0,1)) dtype=f32 shape=(2)] b
    d:f32[2] = add a c
  in (d) }
)";
  absl::StatusOr<ir::Module> module = ir::ParseModule(kText);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<std::vector<Tensor>> out = RunModule(*module, {F32({4}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status();
  // Position 0 returns its block; position 1 its block plus position 0's squared.
  EXPECT_EQ((*out)[0].ToDoubles(), (std::vector<double>{1, 2, 3 + 1, 4 + 4}));
}

TEST(RunModuleTest, LoweredShardMapModuleThroughAFile) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  auto f = jit(shard_map(
      [](Tracer x, Tracer y) {
        return std::vector<Tracer>{lax::psum(x, "x"), y * 2};
      },
      mesh, {P("x", None), P("x")}, {P(None, None), P("x")}));
  auto lowered =
      f.lower({{DType::kF32, {4, 2}}, {DType::kS32, {6}}},
              {NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P("x"))});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->module().view(), ir::PER_DEVICE);
  for (const char* name : {"lowered.txt", "lowered.pbtxt", "lowered.pb"}) {
    std::string path = TempPath(name);
    ASSERT_TRUE(ir::WriteModuleFile(lowered->module(), path).ok());
    absl::StatusOr<ir::Module> module = ir::ReadModuleFile(path);
    ASSERT_TRUE(module.ok()) << module.status();

    absl::StatusOr<std::vector<Tensor>> out = RunModule(
        *module, {F32({4, 2}, {1, 2, 3, 4, 10, 20, 30, 40}),
                  Tensor::FromDoubles({DType::kS32, {6}}, {1, -2, 3, -4, 5, -6})});
    ASSERT_TRUE(out.ok()) << name << ": " << out.status();
    ASSERT_EQ(out->size(), 2u);
    EXPECT_EQ((*out)[0].type().ToString(), "f32[2,2]");
    EXPECT_EQ((*out)[0].ToDoubles(), (std::vector<double>{11, 22, 33, 44}));
    EXPECT_EQ((*out)[1].type().ToString(), "s32[6]");
    EXPECT_EQ((*out)[1].ToDoubles(), (std::vector<double>{2, -4, 6, -8, 10, -12}));
  }
}

TEST(RunModuleTest, GlobalViewModule) {
  Runtime rt({.num_devices = 2});
  Mesh mesh = *make_mesh(rt, {{"x", 2}});
  // Kept global (unpartitioned) by disabling the SPMD partitioner.
  auto f = jit([](Tracer a, Tracer b) { return jnp::matmul(a, b); },
               {.pipeline = {.disabled = {"spmd-partition"}}});
  auto lowered =
      f.lower({{DType::kF32, {2, 3}}, {DType::kF32, {3, 2}}},
              {NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P())});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->module().view(), ir::GLOBAL);
  absl::StatusOr<std::vector<Tensor>> out = RunModule(
      lowered->module(), {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3, 2}, {1, 0, 0, 1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].ToDoubles(), (std::vector<double>{4, 5, 10, 11}));
}

// A traced global-view module run from a file goes through jit's lowering (it is partitioned,
// as jit would run it) on either backend, with jit's result.
TEST(RunModuleTest, TracedModuleRunsAsJitRunsItOnBothBackends) {
  Runtime rt({.num_devices = 4});
  Mesh mesh = *make_mesh(rt, {{"x", 2}, {"y", 2}});
  auto f = jit([](Tracer a, Tracer b) { return jnp::matmul(a, b); });
  const std::vector<NamedSharding> shardings = {NamedSharding(mesh, P("x", "y")),
                                                NamedSharding(mesh, P("y", None))};
  auto lowered =
      f.lower({{DType::kF32, {4, 6}}, {DType::kF32, {6, 2}}}, shardings);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  ASSERT_EQ(lowered->traced_module().view(), ir::GLOBAL);
  ASSERT_EQ(lowered->module().view(), ir::PER_DEVICE);
  const Tensor a = F32({4, 6}, Iota(24));
  const Tensor b = F32({6, 2}, Iota(12));
  std::vector<double> want;
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < 6; ++k) sum += static_cast<double>(i * 6 + k) * (k * 2 + j);
      want.push_back(sum);
    }
  }
  for (Backend backend : {Backend::kX86, Backend::kReference}) {
    absl::StatusOr<std::vector<Tensor>> out =
        RunModule(lowered->traced_module(), {a, b}, 0, {}, {}, backend);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].ToDoubles(), want) << (backend == Backend::kX86 ? "x86" : "reference");
  }
}

TEST(RunModuleTest, ErrorsNameTheInputAndBothTypes) {
  ir::Module module = *ir::ParseModule(kPsumModule);
  absl::StatusOr<std::vector<Tensor>> out =
      RunModule(module, {F32({3, 3}, Iota(9))}, 0, {"x.npy"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("input 0 (x.npy): expected f32[4,3], got f32[3,3]"));

  out = RunModule(module, {Tensor::FromDoubles({DType::kS32, {4, 3}}, Iota(12))});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("input 0: expected f32[4,3], got s32[4,3]"));

  out = RunModule(module, {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("takes 1 inputs, got 0"));

  out = RunModule(module, {F32({4, 3}, Iota(12))}, /*num_devices=*/1);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("on a runtime of 1 devices"));

  ir::Module bad = module;
  bad.mutable_functions(0)->mutable_body()->mutable_ops(0)->mutable_all_reduce()->set_axes(0, "z");
  out = RunModule(bad, {F32({4, 3}, Iota(12))});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("does not verify"));
}

// A per-device module whose blocks make a global array past the type limits is refused before
// anything is allocated for it (its own types verify).
TEST(RunModuleTest, GlobalTypesPastTheLimitsAreRefused) {
  absl::StatusOr<ir::Module> module = ir::ParseModule(
      "module big [view=per_device mesh={x:1024} entry=main param_shardings=(P(x)) "
      "result_shardings=(P())]\n"
      "func main = { lambda ; a:pred[281474976710656]. let\n  in (a) }\n");
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<GlobalSignature> sig = ModuleGlobalSignature(*module);
  ASSERT_FALSE(sig.ok());
  EXPECT_THAT(std::string(sig.status().message()),
              HasSubstr("param 0: global type pred[288230376151711744] has more than"));
  absl::StatusOr<std::vector<Tensor>> out = RunModule(*module, {});
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("param 0: global type"));
}

// A deadline stops a run of either view: per-device (devices waiting at a psum) and global.
TEST(RunModuleTest, DeadlineStopsALoopThatWouldRunForHours) {
  for (const char* text : {kForeverPerDevice, kForeverGlobal}) {
    absl::StatusOr<ir::Module> module = ir::ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status();
    absl::StatusOr<std::vector<Tensor>> out =
        RunModule(*module, {F32({4, 3}, Iota(12))}, 0, {},
                  runtime::RunOptions::WithTimeout(absl::Milliseconds(100)));
    ASSERT_FALSE(out.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  }
}

// Runs a command line, returning its exit status; stderr goes to `*err`.
int RunCommand(const std::string& command, std::string* err) {
  std::string err_path = TempPath("stderr.txt");
  int status = std::system((command + " 2>" + err_path).c_str());
  std::ifstream in(err_path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  *err = buffer.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// sum(sin(a) * a) over a sharded [4, 3] array: irrun --transform runs its VJP (gradient
// cos(a) * a + sin(a)) and JVP.
constexpr char kSinModule[] = R"(module g [view=global mesh={x:2} devices=(0,1) entry=main param_shardings=(P(x)) result_shardings=(P())]
func main = { lambda ; a:f32[4,3]. let
    b:f32[4,3] = sin a
    c:f32[4,3] = mul b a
    d:f32[] = reduce_sum[axes=(0,1)] c
  in (d) }
)";

TEST(IrrunTest, RunsTheVjpAndJvpOfAModule) {
  const std::string irrun = "tools/irrun";
  const std::string module = TempPath("sin.ir");
  const std::string x = TempPath("sin_x.npy"), t = TempPath("sin_t.npy");
  const std::string ct = TempPath("sin_ct.npy");
  const std::string value = TempPath("sin_value.npy"), grad = TempPath("sin_grad.npy");
  std::ofstream(module) << kSinModule;
  std::vector<double> xs = Iota(12), ts(12, 0.5);
  for (double& v : xs) v = 0.3 * v - 1.5;
  ASSERT_TRUE(WriteNpy(F32({4, 3}, xs), x).ok());
  ASSERT_TRUE(WriteNpy(F32({4, 3}, ts), t).ok());
  ASSERT_TRUE(WriteNpy(Tensor::FromDoubles({ir::DType::kF32, {}}, {2.0}), ct).ok());
  std::string err;
  ASSERT_EQ(RunCommand(irrun + " " + module + " --transform=vjp --inputs=" + x + "," + ct +
                           " --outputs=" + value + "," + grad,
                       &err),
            0)
      << err;
  absl::StatusOr<Tensor> g = ReadNpy(grad);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->type().ToString(), "f32[4,3]");
  double directional = 0;
  for (int i = 0; i < 12; ++i) {
    const double a = static_cast<float>(xs[i]);
    const double d = std::cos(a) * a + std::sin(a);
    EXPECT_NEAR(g->GetDouble(i), 2.0 * d, 1e-5) << i;  // times the cotangent 2
    directional += d * 0.5;
  }
  ASSERT_EQ(RunCommand(irrun + " " + module + " --transform=jvp --inputs=" + x + "," + t +
                           " --outputs=" + value + "," + grad,
                       &err),
            0)
      << err;
  absl::StatusOr<Tensor> tangent = ReadNpy(grad);
  ASSERT_TRUE(tangent.ok()) << tangent.status();
  EXPECT_NEAR(tangent->GetDouble(0), directional, 1e-4);
  EXPECT_EQ(RunCommand(irrun + " " + module + " --transform=hessian --inputs=" + x +
                           " --outputs=" + value,
                       &err),
            2);
  EXPECT_THAT(err, HasSubstr("--transform must be jvp or vjp, got \"hessian\""));
}

TEST(IrrunTest, RunsAModuleFileOnNpyFiles) {
  const std::string irrun = "tools/irrun";
  const std::string module = TempPath("psum.ir");
  const std::string x = TempPath("x.npy");
  const std::string bad = TempPath("bad.npy");
  const std::string out = TempPath("out.npy");
  std::ofstream(module) << kPsumModule;
  ASSERT_TRUE(WriteNpy(F32({4, 3}, Iota(12)), x).ok());
  ASSERT_TRUE(WriteNpy(F32({2, 3}, Iota(6)), bad).ok());

  std::string err;
  ASSERT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + " --outputs=" + out, &err), 0) << err;
  absl::StatusOr<Tensor> result = ReadNpy(out);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->type().ToString(), "f32[2,3]");
  EXPECT_EQ(result->ToDoubles(), (std::vector<double>{6, 8, 10, 12, 14, 16}));

  // Same with an explicit device count larger than the mesh.
  ASSERT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + " --outputs=" + out + " --devices=3",
                &err),
            0)
      << err;

  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + bad + " --outputs=" + out, &err), 1);
  EXPECT_THAT(err, HasSubstr("input 0 (" + bad + "): expected f32[4,3], got f32[2,3]"));

  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + "," + x + " --outputs=" + out, &err), 1);
  EXPECT_THAT(err, HasSubstr("takes 1 inputs, --inputs gives 2"));

  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + " --outputs=" + out + "," + out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("returns 1 outputs, --outputs gives 2"));

  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + module + " --outputs=" + out, &err), 1);
  EXPECT_THAT(err, HasSubstr("not a .npy file"));

  EXPECT_EQ(RunCommand(irrun + " " + TempPath("missing.ir") + " --inputs=" + x + " --outputs=" + out,
                &err),
            1);
  EXPECT_THAT(err, HasSubstr("cannot open module file"));

  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + " --outputs=" + out + " --bogus", &err),
            2);
  EXPECT_THAT(err, HasSubstr("usage: irrun"));
  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x, &err), 2);
  EXPECT_THAT(err, HasSubstr("no --outputs"));

  // A module that does not verify is refused before its shardings are read.
  const std::string bad_axis = TempPath("bad_axis.ir");
  std::ofstream(bad_axis) << R"(module m [view=per_device mesh={x:2} devices=(0,1) entry=main param_shardings=(P(z)) result_shardings=(P())]
func main = { lambda ; a:f32[2,3]. let
    b:f32[2,3] = psum[axes=(x)] a
  in (b) }
)";
  EXPECT_EQ(RunCommand(irrun + " " + bad_axis + " --inputs=" + x + " --outputs=" + out, &err), 1);
  EXPECT_THAT(err, HasSubstr("axis \"z\" of spec P(z) is not in mesh"));

  // --timeout stops a run that would take hours.
  const std::string forever = TempPath("forever.ir");
  std::ofstream(forever) << kForeverPerDevice;
  EXPECT_EQ(RunCommand(irrun + " " + forever + " --inputs=" + x + " --outputs=" + out +
                           " --timeout=0.2",
                       &err),
            1);
  EXPECT_THAT(err, HasSubstr("deadline"));
  EXPECT_EQ(RunCommand(irrun + " " + module + " --inputs=" + x + " --outputs=" + out +
                           " --timeout=-1",
                       &err),
            2);
  EXPECT_THAT(err, HasSubstr("--timeout must be a positive number of seconds"));
}

}  // namespace
}  // namespace shardjit::tools
