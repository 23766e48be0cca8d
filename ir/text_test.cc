// Text form round trip: every primitive parses, verifies, prints back to the same text, and
// parsing the printed text gives the same proto. Parse errors name the line.
#include <map>
#include <string>
#include <vector>

#include "fmt/format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "ir/io.h"
#include "ir/parser.h"
#include "ir/primitive.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace shardjit::ir {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string primitive;
  std::string params;  // "a:f32[2,3] b:f32[2,3]"
  std::string body;    // op lines (4-space indented), canonical names
  std::string result;
  std::string view = "per_device";
};

std::string ModuleText(const Case& c) {
  return "module m [view=" + c.view +
         " mesh={x:2,y:2} devices=(0,1,2,3) entry=main param_shardings=() "
         "result_shardings=()]\nfunc main = { lambda ; " +
         c.params + ". let\n" + c.body + "  in (" + c.result + ") }\n";
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const std::string ab = "a:f32[2,3] b:f32[2,3]";
  for (const char* op : {"add", "sub", "mul", "div", "rem", "max", "min"}) {
    cases.push_back({op, ab, std::string("    c:f32[2,3] = ") + op + " a b\n", "c"});
  }
  for (const char* op : {"neg", "abs", "exp", "log", "tanh", "sqrt", "rsqrt", "logistic"}) {
    cases.push_back({op, "a:f32[2,3]", std::string("    b:f32[2,3] = ") + op + " a\n", "b"});
  }
  for (const char* op : {"sin", "cos", "tan", "erf", "erf_inv", "log1p", "expm1", "floor",
                         "ceil", "sign"}) {
    cases.push_back({op, "a:bf16[2,3]", std::string("    b:bf16[2,3] = ") + op + " a\n", "b"});
  }
  for (const char* op : {"pow", "atan2", "nextafter"}) {
    cases.push_back({op, ab, std::string("    c:f32[2,3] = ") + op + " a b\n", "c"});
  }
  for (const char* op : {"and", "or", "xor", "shift_left", "shift_right_logical",
                         "shift_right_arithmetic"}) {
    cases.push_back({op, "a:s32[5] b:s32[5]", std::string("    c:s32[5] = ") + op + " a b\n",
                     "c"});
  }
  cases.push_back({"not", "a:pred[5]", "    b:pred[5] = not a\n", "b"});
  cases.push_back({"population_count", "a:s32[5]", "    b:s32[5] = population_count a\n", "b"});
  cases.push_back({"is_finite", "a:f32[2]", "    b:pred[2] = is_finite a\n", "b"});
  cases.push_back({"round", "a:f32[2]",
                   "    b:f32[2] = round[rounding_method=TO_NEAREST_EVEN] a\n"
                   "    c:f32[2] = round[rounding_method=AWAY_FROM_ZERO] a\n",
                   "b, c"});
  cases.push_back({"integer_pow", "a:s32[2]", "    b:s32[2] = integer_pow[y=3] a\n", "b"});
  cases.push_back({"compare", ab, "    c:pred[2,3] = compare[direction=LT] a b\n", "c"});
  cases.push_back({"select", "a:pred[2,3] b:f32[2,3] c:f32[2,3]",
                   "    d:f32[2,3] = select a b c\n", "d"});
  cases.push_back({"bitcast_convert_type", "a:f32[2,3]",
                   "    b:s32[2,3] = bitcast_convert_type[new_dtype=s32] a\n", "b"});
  cases.push_back({"threefry2x32", "a:u32[4] b:u32[4] c:u32[4] d:u32[4]",
                   "    e:u32[4] f:u32[4] = threefry2x32 a b c d\n", "e, f"});
  cases.push_back({"convert_element_type", "a:f32[2,3]",
                   "    b:bf16[2,3] = convert_element_type[new_dtype=bf16] a\n", "b"});
  cases.push_back({"constant", "",
                   "    a:s32[] = constant[dtype=s32 value=(1024)]\n"
                   "    b:f32[3] = constant[dtype=f32 shape=(3) value=(1.5,-inf,nan)]\n",
                   "a, b"});
  cases.push_back(
      {"iota", "", "    a:s32[2,3] = iota[dtype=s32 shape=(2,3) dimension=1]\n", "a"});
  cases.push_back({"broadcast_in_dim", "a:f32[2,3]",
                   "    b:f32[4,2,3] = broadcast_in_dim[shape=(4,2,3) "
                   "broadcast_dimensions=(1,2)] a\n",
                   "b"});
  cases.push_back({"reshape", "a:f32[2,3]", "    b:f32[3,2] = reshape[new_sizes=(3,2)] a\n", "b"});
  cases.push_back(
      {"transpose", "a:f32[2,3]", "    b:f32[3,2] = transpose[permutation=(1,0)] a\n", "b"});
  cases.push_back({"slice", "a:f32[2,3]",
                   "    b:f32[1,2] = slice[start_indices=(1,0) limit_indices=(2,3) "
                   "strides=(1,2)] a\n",
                   "b"});
  cases.push_back({"dynamic_slice", "a:f32[2,3] b:s32[] c:s32[]",
                   "    d:f32[1,2] = dynamic_slice[slice_sizes=(1,2)] a b c\n", "d"});
  cases.push_back({"dynamic_update_slice", "a:f32[2,3] b:f32[1,2] c:s32[] d:s32[]",
                   "    e:f32[2,3] = dynamic_update_slice a b c d\n", "e"});
  cases.push_back({"concatenate", ab, "    c:f32[4,3] = concatenate[dimension=0] a b\n", "c"});
  for (const char* op : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}) {
    cases.push_back({op, "a:f32[2,3]", std::string("    b:f32[3] = ") + op + "[axes=(0)] a\n",
                     "b"});
  }
  for (const char* op : {"reduce_and", "reduce_or"}) {
    cases.push_back({op, "a:pred[2,3]",
                     std::string("    b:pred[2] = ") + op + "[axes=(1)] a\n", "b"});
  }
  cases.push_back({"pad", "a:f32[2,3] b:f32[]",
                   "    c:f32[4,4] = pad[padding_config=((1,1,0),(-1,0,1))] a b\n", "c"});
  cases.push_back({"gather", "a:f32[7,5] b:s32[3,2,1]",
                   "    c:f32[3,2,5] = gather[offset_dims=(2) collapsed_slice_dims=(0) "
                   "start_index_map=(0) slice_sizes=(1,5) mode=FILL_OR_DROP fill_value=nan] a b\n",
                   "c"});
  cases.push_back({"gather_fill_bits", "a:u64[7,5] b:s32[3,1]",
                   "    c:u64[3,5] = gather[offset_dims=(1) collapsed_slice_dims=(0) "
                   "start_index_map=(0) slice_sizes=(1,5) mode=FILL_OR_DROP fill_value=0 "
                   "fill_bits=18446744073709551615] a b\n",
                   "c"});
  for (const char* op : {"scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"}) {
    cases.push_back({op, "a:f32[7,5] b:s32[3,1] c:f32[3,5]",
                     std::string("    d:f32[7,5] = ") + op +
                         "[update_window_dims=(1) inserted_window_dims=(0) "
                         "scatter_dims_to_operand_dims=(0) mode=CLIP] a b c\n",
                     "d"});
  }
  cases.push_back({"rev", "a:f32[2,3]", "    b:f32[2,3] = rev[dimensions=(0,1)] a\n", "b"});
  cases.push_back({"clamp", "a:f32[] b:f32[2,3] c:f32[2,3]", "    d:f32[2,3] = clamp a b c\n",
                   "d"});
  cases.push_back({"sort", "a:f32[2,3] b:s32[2,3]",
                   "    c:f32[2,3] d:s32[2,3] = sort[dimension=1 is_stable=True num_keys=1] a b\n",
                   "c, d"});
  cases.push_back({"top_k", "a:bf16[2,5]",
                   "    b:bf16[2,3] c:s32[2,3] = top_k[k=3 axis=1] a\n", "b, c"});
  for (const char* op : {"argmax", "argmin"}) {
    cases.push_back({op, "a:f32[2,3]",
                     std::string("    b:s32[3] = ") + op + "[axis=0 index_dtype=s32] a\n", "b"});
  }
  for (const char* op : {"cumsum", "cumprod", "cummax", "cummin"}) {
    cases.push_back({op, "a:s32[2,3]",
                     std::string("    b:s32[2,3] = ") + op + "[axis=1 reverse=True] a\n", "b"});
  }
  cases.push_back({"dot_general", "a:bf16[5,2,3] b:bf16[3,5,4]",
                   "    c:f32[5,2,4] = dot_general[lhs_contracting_dims=(2) "
                   "rhs_contracting_dims=(0) lhs_batch_dims=(0) rhs_batch_dims=(1) "
                   "preferred_element_type=f32] a b\n",
                   "c"});
  cases.push_back({"dot_accumulate", "a:f32[6,4] b:bf16[2,3] c:bf16[3,4] d:s32[] e:s32[]",
                   "    f:f32[6,4] = dot_accumulate[lhs_contracting_dims=(1) "
                   "rhs_contracting_dims=(0) preferred_element_type=f32] a b c d e\n",
                   "f"});
  cases.push_back({"fori_loop", "a:f32[2,3]",
                   "    e:f32[2,3] = fori_loop[lower=0 upper=3 body={ lambda ; b:s32[] "
                   "c:f32[2,3]. let\n"
                   "          d:f32[2,3] = add c a\n"
                   "        in (d) }] a\n",
                   "e"});
  cases.push_back({"while_loop", "a:f32[2,3] b:f32[]",
                   "    h:f32[2,3] = while_loop[cond={ lambda ; c:f32[2,3]. let\n"
                   "          d:f32[] = reduce_sum[axes=(0,1)] c\n"
                   "          e:pred[] = compare[direction=LT] d b\n"
                   "        in (e) } body={ lambda ; f:f32[2,3]. let\n"
                   "          g:f32[2,3] = add f f\n"
                   "        in (g) }] a\n",
                   "h"});
  cases.push_back({"cond", "a:s32[] b:f32[2,3]",
                   "    f:f32[2,3] = cond[branches=({ lambda ; c:f32[2,3]. let\n"
                   "          d:f32[2,3] = neg c\n"
                   "        in (d) },{ lambda ; e:f32[2,3]. let\n"
                   "        in (b) })] a b\n",
                   "f"});
  cases.push_back({"custom_jvp_call", "a:f32[3]",
                   "    i:f32[3] = custom_jvp_call[fun={ lambda ; b:f32[3]. let\n"
                   "          c:f32[3] = sin b\n"
                   "        in (c) } jvp={ lambda ; d:f32[3] e:f32[3]. let\n"
                   "          f:f32[3] = sin d\n"
                   "          g:f32[3] = cos d\n"
                   "          h:f32[3] = mul e g\n"
                   "        in (f, h) }] a\n",
                   "i"});
  cases.push_back({"custom_vjp_call", "a:f32[3]",
                   "    i:f32[3] = custom_vjp_call[fun={ lambda ; b:f32[3]. let\n"
                   "          c:f32[3] = exp b\n"
                   "        in (c) } fwd={ lambda ; d:f32[3]. let\n"
                   "          e:f32[3] = exp d\n"
                   "        in (e, e) } bwd={ lambda ; f:f32[3] g:f32[3]. let\n"
                   "          h:f32[3] = mul f g\n"
                   "        in (h) }] a\n",
                   "i"});
  cases.push_back({"checkpoint", "a:f32[3] b:f32[3]",
                   "    e:f32[3] = checkpoint[body={ lambda ; c:f32[3]. let\n"
                   "          d:f32[3] = mul c b\n"
                   "        in (d) } prevent_cse=True policy=NOTHING_SAVEABLE] a\n",
                   "e"});
  cases.push_back({"name", "a:f32[3]",
                   "    d:f32[3] = checkpoint[body={ lambda ; b:f32[3]. let\n"
                   "          c:f32[3] = name[name=hidden] b\n"
                   "        in (c) } prevent_cse=False policy=SAVE_ONLY_THESE_NAMES "
                   "names=(hidden,\"out 2\") also_saved=((DOTS_SAVEABLE,()),"
                   "(SAVE_ANY_NAMES_BUT_THESE,(hidden)))] a\n",
                   "d"});
  cases.push_back({"optimization_barrier", "a:f32[3] b:s32[]",
                   "    c:f32[3] d:s32[] = optimization_barrier a b\n",
                   "c, d"});
  cases.push_back({"pvary", "a:f32[4,4]",
                   "    e:f32[4,4] = shard_map[in_specs=(P(x,None)) out_specs=(P(x,None)) "
                   "body={ lambda ; b:f32[2,4]. let\n"
                   "          c:f32[2,4] = pvary[axes=(y)] b\n"
                   "          d:f32[2,4] = psum[axes=(y) invariant=True] c\n"
                   "        in (d) } check_vma=True] a\n",
                   "e", "global"});
  cases.push_back({"shard_map", "a:f32[4,4]",
                   "    d:f32[4,2] = shard_map[in_specs=(P(x,y)) out_specs=(P(x,None)) "
                   "body={ lambda ; b:f32[2,2]. let\n"
                   "          c:f32[2,2] = psum[axes=(y)] b @scope(\"reduce/y\")\n"
                   "        in (c) }] a\n",
                   "d", "global"});
  cases.push_back({"pallas_call", "a:s32[2] b:f32[5,4]",
                   "    p:f32[5,4] = pallas_call[name=k grid=(2,3) num_scalar_prefetch=1 "
                   "in_specs=(((4,0),{ lambda ; c:s32[] d:s32[] e:ref[s32[2]]. let\n"
                   "          f:s32[] = ref_load[sizes=(1) squeezed=(0)] e c\n"
                   "        in (f, d) })) out_specs=(ANY) out_shapes=(f32[5,4]) "
                   "dimension_semantics=(PARALLEL,ARBITRARY) input_output_aliases=(-1) "
                   "kernel={ lambda ; g:ref[s32[2]] h:ref[f32[4]] i:ref[f32[5,4]] j:ref[f32[4]]. let\n"
                   "          k:s32[] = program_id[axis=0]\n"
                   "          l:s32[] = num_programs[axis=1]\n"
                   "          m:f32[4] = ref_load[sizes=(4)] h k\n"
                   "          n:f32[] = ref_load[sizes=(1) squeezed=(0)] j l\n"
                   "          _ = ref_store[sizes=(4)] j m k\n"
                   "          o:f32[1,4] = ref_load[sizes=(1,4)] i k l\n"
                   "          _ = ref_store[sizes=(1,4)] i o l k\n"
                   "        in () }] a b\n",
                   "p"});
  // The kernel ops appear only inside the pallas_call above.
  for (const char* op : {"ref_load", "ref_store", "program_id", "num_programs"}) {
    Case c = cases.back();
    c.primitive = op;
    cases.push_back(c);
  }
  // Kernels on different devices: semaphores, local and remote copies (by mesh coordinates and
  // by logical id).
  cases.push_back({"dma_start", "a:f32[4,2]",
                   "    k:f32[8,2] = pallas_call[name=ring grid=(1) num_scalar_prefetch=0 "
                   "in_specs=(ANY) out_specs=(ANY) out_shapes=(f32[8,2]) "
                   "kernel={ lambda ; b:ref[f32[4,2]] c:ref[f32[8,2]] d:ref[dma_sem[2]] e:ref[sem[]]. let\n"
                   "          f:s32[] = axis_index[axes=(x)]\n"
                   "          g:s32[] = constant[dtype=s32 value=(0)]\n"
                   "          h:s32[] = constant[dtype=s32 value=(1)]\n"
                   "          _ = semaphore_signal[device_axes=(x) logical_device=False] e h f\n"
                   "          _ = semaphore_signal[logical_device=True] e h g\n"
                   "          _ = semaphore_wait e h\n"
                   "          i:s32[] = semaphore_read e\n"
                   "          _ = dma_start[src_sizes=(4,2) dst_sizes=(4,2) has_src_sem=False "
                   "logical_device=False] b g g c g g d g\n"
                   "          _ = dma_start[src_sizes=(1,2) src_squeezed=(0) dst_sizes=(1,2) "
                   "dst_squeezed=(0) "
                   "has_src_sem=True device_axes=(y,x) logical_device=False] b g g c h g d g d "
                   "h f g\n"
                   "          _ = dma_wait[bytes=8] d h\n"
                   "          j:s32[] = semaphore_read d g\n"
                   "        in () }] a\n",
                   "k"});
  for (const char* op : {"semaphore_signal", "semaphore_wait", "semaphore_read", "dma_wait"}) {
    Case c = cases.back();
    c.primitive = op;
    cases.push_back(c);
  }
  cases.push_back({"fusion", "a:f32[2,3] b:f32[] c:f32[3]",
                   "    l:bf16[2,3] = fusion[body={ lambda ; d:f32[2,3] e:f32[] f:f32[3]. let\n"
                   "          g:f32[2,3] = broadcast_in_dim[shape=(2,3)] e\n"
                   "          h:f32[2,3] = broadcast_in_dim[shape=(2,3) broadcast_dimensions=(1)] f\n"
                   "          i:f32[2,3] = max d g\n"
                   "          j:f32[2,3] = mul i h\n"
                   "          k:bf16[2,3] = convert_element_type[new_dtype=bf16] j\n"
                   "        in (k) }] a b c\n",
                   "l"});
  for (const char* op : {"psum", "pmean", "pmax", "pmin"}) {
    cases.push_back({op, "a:f32[2,3]",
                     std::string("    b:f32[2,3] = ") + op +
                         "[axes=(x,y) axis_index_groups=((0,1),(3,2))] a\n",
                     "b"});
  }
  cases.push_back({"all_gather", "a:f32[2,3]",
                   "    b:f32[2,2,3] = all_gather[axes=(x) axis=0 tiled=False] a\n"
                   "    c:f32[2,6] = all_gather[axes=(y) axis=1 tiled=True] a\n"
                   "    d:f32[4,3] = all_gather[axes=(x) axis=0 tiled=True invariant=True] a\n",
                   "b, c, d"});
  cases.push_back({"psum_scatter", "a:f32[2,3]",
                   "    b:f32[1,3] = psum_scatter[axes=(x) scatter_dimension=0 tiled=True] a\n"
                   "    c:f32[3] = psum_scatter[axes=(y) scatter_dimension=0 tiled=False] a\n",
                   "b, c"});
  cases.push_back(
      {"ppermute", "a:f32[2,3]", "    b:f32[2,3] = ppermute[axes=(x) perm=((0,1),(1,0))] a\n", "b"});
  cases.push_back({"all_to_all", "a:f32[2,4]",
                   "    b:f32[1,8] = all_to_all[axes=(x) split_axis=0 concat_axis=1 tiled=True] a\n"
                   "    c:f32[4,2] = all_to_all[axes=(y) split_axis=0 concat_axis=1 tiled=False] "
                   "a\n",
                   "b, c"});
  cases.push_back({"with_sharding_constraint", "a:f32[4,6]",
                   "    b:f32[4,6] = with_sharding_constraint[sharding=P(x,None)] a\n"
                   "    c:f32[4,6] = with_sharding_constraint[sharding=P((x,y))] b\n",
                   "c", "global"});
  cases.push_back({"ragged_all_to_all", "a:f32[4,3] b:f32[6,3] c:s32[4] d:s32[4] e:s32[4] f:s32[4]",
                   "    g:f32[6,3] = ragged_all_to_all[axes=(x,y)] a b c d e f\n"
                   "    h:f32[6,3] = ragged_all_to_all[axes=(y) axis_index_groups=((1,0))] a b c d "
                   "e f\n",
                   "g, h"});
  cases.push_back({"gmm", "a:bf16[6,4] b:bf16[2,4,3] c:s32[3] d:s32[]",
                   "    e:f32[6,3] = gmm[transpose_rhs=False preferred_element_type=f32 "
                   "num_actual_groups=0] a b c d\n"
                   "    f:bf16[4,6] = transpose[permutation=(1,0)] a\n"
                   "    g:bf16[2,3,4] = transpose[permutation=(0,2,1)] b\n"
                   "    h:bf16[6,3] = gmm[transpose_rhs=True preferred_element_type=bf16 "
                   "num_actual_groups=0] a g c\n",
                   "e, f, h"});
  cases.push_back({"tgmm", "a:f32[4,6] b:f32[6,3] c:s32[3]",
                   "    d:f32[2,4,3] = tgmm[transpose_rhs=False preferred_element_type=f32 "
                   "num_actual_groups=2] a b c\n",
                   "d"});
  cases.push_back({"psend", "a:f32[2,3]",
                   "    b:pred[0] = psend[axes=(x) perm=((0,1))] a\n"
                   "    c:f32[2,3] = precv[axes=(x) perm=((0,1)) dtype=f32 shape=(2,3)] b\n",
                   "c"});
  cases.push_back({"precv", "a:pred[0]",
                   "    b:s32[] = precv[axes=(x,y) perm=((3,0),(0,3)) dtype=s32] a\n", "b"});
  cases.push_back({"axis_index", "", "    a:s32[] = axis_index[axes=(x,y)]\n", "a"});
  cases.push_back(
      {"pbroadcast", "a:f32[2,3]", "    b:f32[2,3] = pbroadcast[axes=(x,y) source=3] a\n", "b"});
  // Each async pair: the start's attributes are its blocking twin's; the future is awaited once.
  const std::vector<std::pair<std::string, std::string>> async = {
      {"psum", "[axes=(x,y) axis_index_groups=((0,1),(3,2))] a"},
      {"all_gather", "[axes=(x) axis=0 tiled=True] a"},
      {"psum_scatter", "[axes=(y) scatter_dimension=1 tiled=False] a"},
      {"all_to_all", "[axes=(x) split_axis=0 concat_axis=1 tiled=True] a"},
      {"ppermute", "[axes=(x) perm=((0,1),(1,0))] a"},
      {"pbroadcast", "[axes=(y) source=1] a"}};
  const std::map<std::string, std::string> result_type = {
      {"psum", "f32[2,2]"},       {"all_gather", "f32[4,2]"}, {"psum_scatter", "f32[2]"},
      {"all_to_all", "f32[1,4]"}, {"ppermute", "f32[2,2]"},   {"pbroadcast", "f32[2,2]"}};
  for (const auto& [name, attrs] : async) {
    const std::string t = result_type.at(name);
    const std::string text = "    b:future[" + t + "] = " + name + "_start" + attrs + "\n" +
                             "    c:f32[2,2] = neg a\n" + "    d:" + t + " = " + name +
                             "_done b\n";
    cases.push_back({name + "_start", "a:f32[2,2]", text, "c, d"});
    cases.push_back({name + "_done", "a:f32[2,2]", text, "c, d"});
  }
  // A future carried through a loop: started before it, awaited and restarted in each iteration,
  // awaited after it.
  cases.push_back({"ppermute_start_in_loop", "a:f32[2]",
                   "    b:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] a\n"
                   "    g:future[f32[2]] = fori_loop[lower=0 upper=3 body={ lambda ; c:s32[] "
                   "d:future[f32[2]]. let\n"
                   "          e:f32[2] = ppermute_done d\n"
                   "          f:future[f32[2]] = ppermute_start[axes=(x) perm=((0,1),(1,0))] e\n"
                   "        in (f) }] b\n"
                   "    h:f32[2] = ppermute_done g\n",
                   "h"});
  cases.push_back({"axis_size", "", "    a:s32[] = axis_size[axes=(y)]\n", "a"});
  return cases;
}

class TextRoundTripTest : public ::testing::TestWithParam<Case> {};

TEST_P(TextRoundTripTest, ParsesVerifiesAndPrintsBack) {
  const std::string text = ModuleText(GetParam());
  absl::StatusOr<Module> m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status() << "\n" << text;
  ASSERT_TRUE(VerifyModule(*m).ok()) << VerifyModule(*m) << "\n" << text;
  EXPECT_EQ(PrintModule(*m), text);
  absl::StatusOr<Module> again = ParseModule(PrintModule(*m));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), m->SerializeAsString());
  // Binary and text-proto forms round-trip too.
  for (ModuleFormat f : {ModuleFormat::kBinary, ModuleFormat::kPbtxt}) {
    absl::StatusOr<std::string> data = SerializeModuleAs(*m, f);
    ASSERT_TRUE(data.ok());
    absl::StatusOr<Module> back = ParseModuleAs(*data, f);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->SerializeAsString(), m->SerializeAsString());
  }
}

INSTANTIATE_TEST_SUITE_P(AllPrimitives, TextRoundTripTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.primitive;
                         });

TEST(TextRoundTripTest, EveryRegisteredPrimitiveHasACase) {
  std::vector<Case> cases = Cases();
  for (const Primitive* p : AllPrimitives()) {
    bool found = false;
    for (const Case& c : cases) found = found || c.primitive == p->name;
    EXPECT_TRUE(found) << "no text round-trip case for primitive " << p->name;
  }
}

TEST(TextRoundTripTest, SourceLocationsRoundTripWhenPrinted) {
  absl::StatusOr<Module> m = ParseModule(
      "module m [view=per_device mesh={x:2} devices=(0,1) entry=main]\n"
      "func main = { lambda ; a:f32[2]. let\n"
      "    b:f32[2] = neg a @scope(\"s\") @loc(\"file.cc\", 12)\n"
      "  in (b) }\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->functions(0).body().ops(0).loc().line(), 12);
  std::string with_locs = PrintModule(*m, {.locations = true});
  EXPECT_THAT(with_locs, HasSubstr("@loc(\"file.cc\", 12)"));
  absl::StatusOr<Module> back = ParseModule(with_locs);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*m, *back));
  EXPECT_THAT(PrintModule(*m), ::testing::Not(HasSubstr("@loc")));
}

TEST(TextRoundTripTest, ShardingAnnotationsRoundTrip) {
  const std::string text = ModuleText(
      {"", "a:f32[4,6] b:f32[4,6]",
       "    c:f32[4,6] = add a b @scope(\"s\") @sharding(P(x,None))\n"
       "    d:f32[6] = reduce_sum[axes=(0)] c @sharding(P((y,x)))\n"
       "    e:f32[] = reduce_sum[axes=(0)] d @sharding(P())\n"
       "    i:f32[4,6] j:f32[] = fori_loop[lower=0 upper=2 body={ lambda ; f:s32[] g:f32[4,6] "
       "h:f32[]. let\n"
       "        in (g, h) }] c e @sharding(P(None,y),P())\n",
       "i, j", "global"});
  absl::StatusOr<Module> m = ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(VerifyModule(*m).ok()) << VerifyModule(*m);
  const Op& add = m->functions(0).body().ops(0);
  ASSERT_EQ(add.sharding_size(), 1);
  EXPECT_EQ(add.sharding(0).dims(0).axes(0), "x");
  EXPECT_EQ(m->functions(0).body().ops(3).sharding_size(), 2);
  EXPECT_EQ(PrintModule(*m), text);
}

TEST(TextRoundTripTest, ValueNamesSkipKeywords) {
  EXPECT_EQ(ValueName(0), "a");
  EXPECT_EQ(ValueName(25), "z");
  EXPECT_EQ(ValueName(26), "ba");
  EXPECT_EQ(ValueName(8 * 26 + 13), "in_");
}

struct BadText {
  std::string text;
  std::string error;
};

class ParseErrorTest : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseErrorTest, NamesTheProblem) {
  absl::StatusOr<Module> m = ParseModule(GetParam().text);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(GetParam().error));
}

const char kHeader[] = "module m [view=per_device mesh={x:2} devices=(0,1) entry=main]\n";

INSTANTIATE_TEST_SUITE_P(
    Errors, ParseErrorTest,
    ::testing::Values(
        BadText{"modul m", "line 1: expected \"module\""},
        BadText{std::string(kHeader) + "func main = { lambda ; a:f33[2]. let\n  in (a) }\n",
                "unknown dtype \"f33\""},
        BadText{std::string(kHeader) +
                    "func main = { lambda ; a:f32[2]. let\n    b:f32[2] = neg c\n  in (b) }\n",
                "line 3: value \"c\" is not defined"},
        BadText{std::string(kHeader) +
                    "func main = { lambda ; a:f32[2]. let\n    a:f32[2] = neg a\n  in (a) }\n",
                "value \"a\" is defined twice"},
        BadText{std::string(kHeader) + "func main = { lambda ; a:f32[2]. let\n"
                                       "    b:f32[2] = psum[axes=(x) bogus=1] a\n  in (b) }\n",
                "psum has no attribute \"bogus\""},
        BadText{std::string(kHeader) + "func main = { lambda ; a:f32[2]. let\n"
                                       "    b:f32[2] = neg[axes=(x)] a\n  in (b) }\n",
                "\"neg\" is not a primitive with attributes"},
        BadText{"module m [view=sideways]", "view must be global or per_device"}));

}  // namespace
}  // namespace shardjit::ir

namespace shardjit::ir {
namespace {

TEST(ParseErrorTest, RejectsOutOfRangeNumbersAndUnterminatedStrings) {
  const std::string header = "module m [view=per_device mesh={x:2} devices=(0,1) entry=main]\n";
  EXPECT_THAT(std::string(ParseModule(header +
                                      "func main = { lambda ; a:f32[99999999999999999999]. let\n"
                                      "  in (a) }\n")
                              .status()
                              .message()),
              HasSubstr("bad integer \"99999999999999999999\""));
  EXPECT_THAT(std::string(ParseModule(header +
                                      "func main = { lambda ; a:f32[2]. let\n"
                                      "    b:f32[2] = neg a @loc(\"f.cc\", 4294967296)\n"
                                      "  in (b) }\n")
                              .status()
                              .message()),
              HasSubstr("bad integer"));
  EXPECT_THAT(std::string(ParseModule(header +
                                      "func main = { lambda ; a:f32[2]. let\n"
                                      "    b:f32[2] = neg a @scope(\"open\n  in (b) }\n")
                              .status()
                              .message()),
              HasSubstr("unterminated string"));
}

}  // namespace
}  // namespace shardjit::ir

namespace shardjit::ir {
namespace {

// fori_loops nested `depth` deep in IR text, each passing its carry to the next.
std::string NestedLoops(int depth) {
  std::string text =
      "module m [view=per_device mesh={x:2} devices=(0,1) entry=main]\n"
      "func main = { lambda ; a:f32[2]. let\n";
  for (int d = 0; d < depth; ++d) {
    text += fmt::format("x{0}:f32[2] = fori_loop[lower=0 upper=1 body={{ lambda ; i{0}:s32[] "
                        "c{0}:f32[2]. let\n",
                        d);
  }
  for (int d = depth - 1; d >= 0; --d) {
    const std::string result = d == depth - 1 ? fmt::format("c{}", d) : fmt::format("x{}", d + 1);
    const std::string operand = d == 0 ? "a" : fmt::format("c{}", d - 1);
    text += fmt::format("  in ({}) }}] {}\n", result, operand);
  }
  return text + "  in (x0) }\n";
}

// Nesting is bounded: 20,000 levels are an error naming the limit, not a stack overflow.
TEST(ParseErrorTest, RegionsNestedTooDeep) {
  absl::StatusOr<Module> ok = ParseModule(NestedLoops(kMaxRegionDepth - 1));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(VerifyModule(*ok).ok()) << VerifyModule(*ok);
  for (int depth : {kMaxRegionDepth, 20000}) {
    absl::StatusOr<Module> deep = ParseModule(NestedLoops(depth));
    ASSERT_FALSE(deep.ok()) << depth;
    EXPECT_THAT(std::string(deep.status().message()), HasSubstr("regions nested more than 64 deep"));
  }
}

// The names tools take for --format and the extensions written for them map back to the format.
TEST(ModuleFormatTest, NamesAndExtensionsRoundTrip) {
  const std::pair<const char*, ModuleFormat> kFormats[] = {
      {"text", ModuleFormat::kText}, {"pbtxt", ModuleFormat::kPbtxt},
      {"binary", ModuleFormat::kBinary}};
  for (const auto& [name, format] : kFormats) {
    EXPECT_EQ(ParseModuleFormat(name), format) << name;
    EXPECT_EQ(FormatFromPath("m" + std::string(FormatExtension(format))), format) << name;
  }
  EXPECT_EQ(FormatExtension(ModuleFormat::kBinary), ".pb");
  EXPECT_EQ(ParseModuleFormat("xml"), std::nullopt);
  EXPECT_EQ(ParseModuleFormat(""), std::nullopt);
}

}  // namespace
}  // namespace shardjit::ir
