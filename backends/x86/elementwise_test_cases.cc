#include "backends/x86/elementwise_test_cases.h"

#include <utility>

#include "backends/x86/elementwise_kernel.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"

namespace shardjit::backends::x86 {

using ir::DType;

namespace {

std::string Name(DType d) { return std::string(ir::DTypeName(d)); }

}  // namespace

FusionCase OneOp(const std::string& name, const std::string& op, const std::vector<DType>& dtypes,
                 DType result, std::vector<bool> scalar) {
  scalar.resize(dtypes.size(), false);
  std::string params, body_params, body_ops, operands, args;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const std::string dims = scalar[i] ? "[]" : "[N]";
    params += fmt::format("a{}:{}{} ", i, Name(dtypes[i]), dims);
    body_params += fmt::format("p{}:{}{} ", i, Name(dtypes[i]), dims);
    args += fmt::format(" a{}", i);
    if (scalar[i]) {
      body_ops +=
          fmt::format("q{}:{}[N] = broadcast_in_dim[shape=(N)] p{} ", i, Name(dtypes[i]), i);
      operands += fmt::format(" q{}", i);
    } else {
      operands += fmt::format(" p{}", i);
    }
  }
  params.pop_back();
  body_params.pop_back();
  const std::string fusion =
      fmt::format("z:{0}[N] = fusion[body={{ lambda ; {1}. let {2}r:{0}[N] = {3}{4} in (r) }}]{5}",
                  Name(result), body_params, body_ops, op, operands, args);
  return {name, params, fusion};
}

std::vector<FusionCase> OpCases() {
  const DType kFloats[] = {DType::kF32, DType::kBF16};
  const DType kAll[] = {DType::kF32, DType::kBF16, DType::kS32, DType::kPred};
  std::vector<FusionCase> cases;
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    for (DType d : {DType::kF32, DType::kBF16, DType::kS32}) {
      const std::string name = fmt::format("{}_{}", op, Name(d));
      cases.push_back(OneOp(name, op, {d, d}, d));
      cases.push_back(OneOp(name + "_scalar_lhs", op, {d, d}, d, {true, false}));
      cases.push_back(OneOp(name + "_scalar_rhs", op, {d, d}, d, {false, true}));
      for (int i = 1; i <= 3; ++i) {
        FusionCase& c = cases[cases.size() - i];
        c.generated = !(d == DType::kS32 && std::string(op) == "div");
        if (std::string(op) != "max" && std::string(op) != "min") {
          c.nans = NanRule::kOpenWhereTwoNans;
        }
      }
    }
  }
  for (const char* op : {"neg", "abs"}) {
    for (DType d : {DType::kF32, DType::kBF16, DType::kS32}) {
      cases.push_back(OneOp(fmt::format("{}_{}", op, Name(d)), op, {d}, d));
    }
  }
  const std::pair<const char*, int> kUnary[] = {
      {"sqrt", 0},         {"rsqrt", 0},          {"exp", kExpMaxUlp},
      {"log", kLogMaxUlp}, {"tanh", kTanhMaxUlp}, {"logistic", kLogisticMaxUlp},
      {"erf", kErfMaxUlp}, {"sin", kSinMaxUlp},    {"cos", kCosMaxUlp}};
  for (const auto& [op, ulp] : kUnary) {
    for (DType d : kFloats) {
      cases.push_back(OneOp(fmt::format("{}_{}", op, Name(d)), op, {d}, d));
      cases.back().max_ulp = ulp;
      if (std::string(op) == "sin" || std::string(op) == "cos") {
        cases.back().max_argument = kSinCosMaxArgument;
      }
    }
  }
  for (const char* op : {"floor", "ceil", "sign", "round[rounding_method=AWAY_FROM_ZERO]",
                         "round[rounding_method=TO_NEAREST_EVEN]"}) {
    for (DType d : kFloats) {
      std::string name = op;
      if (name.starts_with("round")) {
        name = name.find("EVEN") != std::string::npos ? "round_even" : "round_away";
      }
      cases.push_back(OneOp(fmt::format("{}_{}", name, Name(d)), op, {d}, d));
    }
  }
  for (const char* dir : {"EQ", "NE", "LT", "LE", "GT", "GE"}) {
    for (DType d : kAll) {
      const std::string op = fmt::format("compare[direction={}]", dir);
      const std::string name = fmt::format("compare_{}_{}", dir, Name(d));
      cases.push_back(OneOp(name, op, {d, d}, DType::kPred));
      cases.push_back(OneOp(name + "_scalar_rhs", op, {d, d}, DType::kPred, {false, true}));
    }
  }
  for (DType d : kAll) {
    const std::string name = fmt::format("select_{}", Name(d));
    cases.push_back(OneOp(name, "select", {DType::kPred, d, d}, d));
    cases.push_back(
        OneOp(name + "_scalars", "select", {DType::kPred, d, d}, d, {true, false, true}));
  }
  for (DType from : kAll) {
    for (DType to : kAll) {
      cases.push_back(OneOp(fmt::format("convert_{}_to_{}", Name(from), Name(to)),
                            fmt::format("convert_element_type[new_dtype={}]", Name(to)), {from},
                            to));
    }
  }
  cases.push_back(OneOp("rem_f32", "rem", {DType::kF32, DType::kF32}, DType::kF32));
  cases.back().generated = false;
  cases.back().nans = NanRule::kOpenWhereTwoNans;
  return cases;
}

std::vector<FusionCase> BodyCases() {
  std::vector<FusionCase> cases = {
      {"MlpTailF32ToBf16", "a:f32[N] b:f32[N] c:f32[N] d:f32[]",
       "z:bf16[N] = fusion[body={ lambda ; e:f32[N] f:f32[N] g:f32[N] h:f32[]. let "
       "i:f32[N] = mul e f j:f32[N] = add i g k:f32[N] = broadcast_in_dim[shape=(N)] h "
       "l:f32[N] = max j k m:bf16[N] = convert_element_type[new_dtype=bf16] l in (m) }] a b c d"},
      {"Bf16Arithmetic", "a:bf16[N] b:bf16[N] s:bf16[]",
       "z:bf16[N] = fusion[body={ lambda ; c:bf16[N] d:bf16[N] t:bf16[]. let "
       "e:bf16[N] = add c d f:bf16[N] = abs e g:bf16[N] = sqrt f h:bf16[N] = neg c "
       "i:bf16[N] = div h g u:bf16[N] = broadcast_in_dim[shape=(N)] t j:bf16[N] = min i u "
       "k:bf16[N] = sub j d in (k) }] a b s"},
      {"Bf16ToF32AndRsqrt", "a:bf16[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:bf16[N] d:f32[N]. let "
       "e:f32[N] = convert_element_type[new_dtype=f32] c f:f32[N] = max d e "
       "g:f32[N] = rsqrt f h:f32[N] = mul g g in (h) }] a b"},
      {"ReluBySelect", "a:f32[N] b:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; c:f32[N] d:f32[N]. let "
       "e:pred[N] = compare[direction=GT] c d f:f32[N] = select e c d "
       "g:f32[N] = convert_element_type[new_dtype=f32] e h:f32[N] = add f g in (h) }] a b"},
      {"S32Chain", "a:s32[N] b:s32[N] c:f32[N]",
       "z:s32[N] = fusion[body={ lambda ; d:s32[N] e:s32[N] f:f32[N]. let "
       "g:s32[N] = mul d e h:s32[N] = neg g i:s32[N] = max h e j:s32[N] = abs i "
       "k:s32[N] = convert_element_type[new_dtype=s32] f l:s32[N] = sub j k "
       "m:s32[N] = min l d in (m) }] a b c"},
      {"MaskedBf16Mean", "a:bf16[N] b:bf16[N] s:bf16[]",
       "z:bf16[N] = fusion[body={ lambda ; c:bf16[N] d:bf16[N] t:bf16[]. let "
       "u:bf16[N] = broadcast_in_dim[shape=(N)] t e:pred[N] = compare[direction=LE] c u "
       "f:bf16[N] = add c d g:bf16[N] = select e f c "
       "h:pred[N] = compare[direction=NE] g d i:bf16[N] = convert_element_type[new_dtype=bf16] h "
       "j:bf16[N] = mul g i in (j) }] a b s"},
      {"SiluF32", "a:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; b:f32[N]. let "
       "c:f32[N] = logistic b d:f32[N] = mul b c in (d) }] a",
       true, kLogisticMaxUlp + 1},
      {"ClampedLogBf16", "a:bf16[N] s:bf16[]",
       "z:bf16[N] = fusion[body={ lambda ; b:bf16[N] t:bf16[]. let "
       "u:bf16[N] = broadcast_in_dim[shape=(N)] t c:bf16[N] = max b u d:bf16[N] = log c "
       "in (d) }] a s",
       true, kLogMaxUlp},
      {"TooManyOperands",
       "a:f32[N] b:f32[N] c:f32[N] d:f32[N] e:f32[N] f:f32[N] g:f32[N] h:f32[N] i:f32[N] "
       "j:f32[N] k:f32[N]",
       "z:f32[N] = fusion[body={ lambda ; l:f32[N] m:f32[N] n:f32[N] o:f32[N] p:f32[N] "
       "q:f32[N] r:f32[N] s:f32[N] t:f32[N] u:f32[N] v:f32[N]. let w:f32[N] = add l m "
       "x:f32[N] = add w n y:f32[N] = add x o ba:f32[N] = add y p bb:f32[N] = add ba q "
       "bc:f32[N] = add bb r bd:f32[N] = add bc s be:f32[N] = add bd t bf:f32[N] = add be u "
       "bg:f32[N] = add bf v in (bg) }] a b c d e f g h i j k",
       false},
  };
  for (FusionCase& c : cases) c.nans = NanRule::kOpen;
  return cases;
}

}  // namespace shardjit::backends::x86
