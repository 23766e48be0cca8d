#include "tests/collectives_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/ir.pb.h"

namespace shardjit::collectives_test {

// ---------------------------------------------------------------------------------------------
// Host arrays
// ---------------------------------------------------------------------------------------------

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    index[d] = flat % dims[d];
    flat /= dims[d];
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + index[d];
  return flat;
}

double HostArray::at(const std::vector<int64_t>& index) const { return values[Ravel(index, dims)]; }

HostArray Generate(std::vector<int64_t> dims,
                   const std::function<double(const std::vector<int64_t>&)>& f) {
  HostArray a{std::move(dims), {}};
  int64_t n = NumElements(a.dims);
  a.values.resize(n);
  for (int64_t i = 0; i < n; ++i) a.values[i] = f(Unravel(i, a.dims));
  return a;
}

PerDevice RoundTo(const PerDevice& arrays, DType dtype) {
  PerDevice out = arrays;
  for (HostArray& a : out) {
    a.values =
        Tensor::FromDoubles({dtype, {static_cast<int64_t>(a.values.size())}}, a.values).ToDoubles();
  }
  return out;
}

namespace {

std::vector<int64_t> Erase(std::vector<int64_t> v, int64_t at) {
  v.erase(v.begin() + at);
  return v;
}

std::vector<int64_t> Insert(std::vector<int64_t> v, int64_t at, int64_t value) {
  v.insert(v.begin() + at, value);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Mesh model
// ---------------------------------------------------------------------------------------------

int64_t MeshModel::size() const {
  int64_t n = 1;
  for (const auto& [name, size] : axes_) n *= size;
  return n;
}

std::vector<std::string> MeshModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, size] : axes_) out.push_back(name);
  return out;
}

std::vector<int64_t> MeshModel::Coords(int64_t position) const {
  std::vector<int64_t> dims;
  for (const auto& [name, size] : axes_) dims.push_back(size);
  return Unravel(position, dims);
}

int64_t MeshModel::AxisId(const std::string& name) const {
  for (size_t a = 0; a < axes_.size(); ++a) {
    if (axes_[a].first == name) return static_cast<int64_t>(a);
  }
  ADD_FAILURE() << "oracle: no axis " << name;
  return 0;
}

int64_t MeshModel::AxisSize(const AxisList& axes) const {
  int64_t n = 1;
  for (const std::string& name : axes) n *= axes_[AxisId(name)].second;
  return n;
}

int64_t MeshModel::AxisIndex(int64_t position, const AxisList& axes) const {
  std::vector<int64_t> c = Coords(position);
  int64_t index = 0;
  for (const std::string& name : axes) {
    int64_t a = AxisId(name);
    index = index * axes_[a].second + c[a];
  }
  return index;
}

MeshModel::Group MeshModel::GroupOf(int64_t position, const AxisList& axes,
                                    const Groups& groups) const {
  std::vector<bool> named(axes_.size(), false);
  for (const std::string& name : axes) named[AxisId(name)] = true;
  const std::vector<int64_t> mine = Coords(position);
  // ring[i]: the position with combined index i among those that agree with `position` on
  // every axis not named.
  std::vector<int64_t> ring(AxisSize(axes), -1);
  for (int64_t q = 0; q < size(); ++q) {
    std::vector<int64_t> c = Coords(q);
    bool same = true;
    for (size_t a = 0; a < axes_.size(); ++a) same = same && (named[a] || c[a] == mine[a]);
    if (same) ring[AxisIndex(q, axes)] = q;
  }
  Group g;
  const int64_t me = AxisIndex(position, axes);
  if (groups.empty()) {
    for (int64_t i = 0; i < static_cast<int64_t>(ring.size()); ++i) g.indices.push_back(i);
  } else {
    for (const std::vector<int64_t>& entry : groups) {
      if (std::find(entry.begin(), entry.end(), me) != entry.end()) g.indices = entry;
    }
  }
  for (size_t k = 0; k < g.indices.size(); ++k) {
    g.members.push_back(ring[g.indices[k]]);
    if (g.indices[k] == me) g.my_index = static_cast<int64_t>(k);
  }
  return g;
}

// ---------------------------------------------------------------------------------------------
// Expected results
// ---------------------------------------------------------------------------------------------

PerDevice ExpectedReduce(const MeshModel& mesh, const PerDevice& in, const std::string& kind,
                         const AxisList& axes, const Groups& groups) {
  const bool sum = kind == "psum" || kind == "pmean";
  const bool max = kind == "pmax";
  const bool mean = kind == "pmean";
  if (!sum && !max && kind != "pmin") {
    std::fprintf(stderr, "ExpectedReduce: unknown reduction '%s'\n", kind.c_str());
    std::abort();
  }
  PerDevice out;
  std::map<std::vector<int64_t>, int64_t> reduced;  // a group's members -> its first position
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group g = mesh.GroupOf(p, axes, groups);
    if (auto it = reduced.find(g.members); it != reduced.end()) {
      out.push_back(out[it->second]);  // every member gets the group's one result
      continue;
    }
    reduced.emplace(g.members, p);
    HostArray r = in[g.members[0]];
    for (size_t k = 1; k < g.members.size(); ++k) {
      const std::vector<double>& v = in[g.members[k]].values;
      for (size_t e = 0; e < r.values.size(); ++e) {
        double& acc = r.values[e];
        acc = sum ? acc + v[e] : max ? std::max(acc, v[e]) : std::min(acc, v[e]);
      }
    }
    if (mean) {
      for (double& acc : r.values) acc /= static_cast<double>(g.members.size());
    }
    out.push_back(std::move(r));
  }
  return out;
}

PerDevice ExpectedAllGather(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                            int64_t axis, bool tiled, const Groups& groups) {
  PerDevice out;
  const std::vector<int64_t>& d = in[0].dims;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group g = mesh.GroupOf(p, axes, groups);
    const int64_t n = static_cast<int64_t>(g.members.size());
    if (tiled) {
      std::vector<int64_t> dims = d;
      dims[axis] *= n;
      out.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> local = i;
        local[axis] %= d[axis];
        return in[g.members[i[axis] / d[axis]]].at(local);
      }));
    } else {
      out.push_back(Generate(Insert(d, axis, n), [&](const std::vector<int64_t>& i) {
        return in[g.members[i[axis]]].at(Erase(i, axis));
      }));
    }
  }
  return out;
}

PerDevice ExpectedPsumScatter(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                              int64_t dim, bool tiled, const Groups& groups) {
  PerDevice sums = ExpectedReduce(mesh, in, "psum", axes, groups);
  PerDevice out;
  const std::vector<int64_t>& d = in[0].dims;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group g = mesh.GroupOf(p, axes, groups);
    const int64_t n = static_cast<int64_t>(g.members.size());
    const HostArray& sum = sums[p];
    if (tiled) {
      const int64_t block = d[dim] / n;
      std::vector<int64_t> dims = d;
      dims[dim] = block;
      out.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
        std::vector<int64_t> src = i;
        src[dim] += g.my_index * block;
        return sum.at(src);
      }));
    } else {
      out.push_back(Generate(Erase(d, dim), [&](const std::vector<int64_t>& i) {
        return sum.at(Insert(i, dim, g.my_index));
      }));
    }
  }
  return out;
}

PerDevice ExpectedPpermute(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                           const std::vector<std::pair<int64_t, int64_t>>& perm) {
  PerDevice out;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group ring = mesh.GroupOf(p, axes, {});
    const int64_t me = mesh.AxisIndex(p, axes);
    HostArray r = in[p];
    std::fill(r.values.begin(), r.values.end(), 0.0);
    for (const auto& [source, target] : perm) {
      if (target == me) r = in[ring.members[source]];
    }
    out.push_back(std::move(r));
  }
  return out;
}

PerDevice ExpectedRaggedAllToAll(const MeshModel& mesh, const RaggedArgs& args,
                                 const AxisList& axes, const Groups& groups) {
  PerDevice out;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group g = mesh.GroupOf(p, axes, groups);
    const int64_t n = static_cast<int64_t>(g.members.size());
    HostArray result = args.output[p];
    const int64_t row = NumElements(result.dims) / std::max<int64_t>(result.dims[0], 1);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t sender = g.members[j];
      const int64_t per_member = NumElements(args.input_offsets[sender].dims) / n;
      for (int64_t k = 0; k < per_member; ++k) {
        const int64_t i = g.my_index * per_member + k;
        const auto from = static_cast<int64_t>(args.input_offsets[sender].values[i]);
        const auto size = static_cast<int64_t>(args.send_sizes[sender].values[i]);
        const auto to = static_cast<int64_t>(args.output_offsets[sender].values[i]);
        for (int64_t e = 0; e < size * row; ++e) {
          result.values[to * row + e] = args.operand[sender].values[from * row + e];
        }
      }
    }
    out.push_back(std::move(result));
  }
  return out;
}

PerDevice ExpectedAllToAll(const MeshModel& mesh, const PerDevice& in, const AxisList& axes,
                           int64_t split, int64_t concat, bool tiled, const Groups& groups) {
  PerDevice out;
  const std::vector<int64_t>& d = in[0].dims;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    MeshModel::Group g = mesh.GroupOf(p, axes, groups);
    const int64_t n = static_cast<int64_t>(g.members.size());
    if (tiled) {
      // Member j sends me chunk my_index of its split dimension; the received chunks are
      // concatenated along `concat` in member order.
      const int64_t chunk = d[split] / n;
      std::vector<int64_t> block = d;
      block[split] = chunk;
      std::vector<int64_t> dims = block;
      dims[concat] *= n;
      out.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
        const int64_t j = i[concat] / block[concat];
        std::vector<int64_t> src = i;
        src[concat] %= block[concat];
        src[split] += g.my_index * chunk;
        return in[g.members[j]].at(src);
      }));
    } else {
      // out[..., j (at concat), ...] = member_j[..., my_index (at split), ...].
      out.push_back(
          Generate(Insert(Erase(d, split), concat, n), [&](const std::vector<int64_t>& i) {
            const int64_t j = i[concat];
            return in[g.members[j]].at(Insert(Erase(i, concat), split, g.my_index));
          }));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Running on the library
// ---------------------------------------------------------------------------------------------

Runtime& SharedRuntime(int num_devices) {
  static std::mutex mu;
  static auto* runtimes = new std::map<int, std::unique_ptr<Runtime>>();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Runtime>& rt = (*runtimes)[num_devices];
  if (rt == nullptr) rt = std::make_unique<Runtime>(RuntimeOptions{.num_devices = num_devices});
  return *rt;
}

PerDevice MakeInputs(const MeshModel& mesh, const std::vector<int64_t>& dims, DType dtype,
                     int seed) {
  PerDevice out;
  for (int64_t p = 0; p < mesh.size(); ++p) {
    out.push_back(Generate(dims, [&](const std::vector<int64_t>& i) {
      const int64_t e = Ravel(i, dims);
      const double scrambled = static_cast<double>((p * 37 + e * 11 + seed * 5) % 23) - 11;
      if (dtype == DType::kS32) return scrambled * 64 + static_cast<double>(p);
      return scrambled + static_cast<double>(p + 1) / 128.0;
    }));
  }
  return RoundTo(out, dtype);
}

namespace {

// P((all mesh axes)): dimension 0 split over the whole mesh in row-major position order.
PartitionSpec StackedSpec(const Mesh& mesh) {
  ir::PartitionSpec proto;
  ir::DimSpec* d = proto.add_dims();
  for (const ir::MeshAxis& a : mesh.proto().axes()) d->add_axes(a.name());
  return PartitionSpec(proto);
}

}  // namespace

absl::StatusOr<DeviceResults> RunPerDevice(const Mesh& mesh, DType dtype, const PerDevice& inputs,
                                           const std::function<std::vector<Tracer>(Tracer)>& body,
                                           int num_results, bool global_view) {
  return RunPerDevice(
      mesh, {{dtype, inputs}},
      [&body](const std::vector<Tracer>& x) { return body(x[0]); }, num_results, global_view);
}

absl::StatusOr<DeviceResults> RunPerDevice(
    const Mesh& mesh, const std::vector<std::pair<DType, PerDevice>>& inputs,
    const std::function<std::vector<Tracer>(const std::vector<Tracer>&)>& body, int num_results,
    bool global_view) {
  const int64_t n = mesh.size();
  const PartitionSpec stacked = StackedSpec(mesh);
  std::vector<Array> args;
  std::vector<std::vector<int64_t>> locals;
  for (const auto& [dtype, per_device] : inputs) {
    const std::vector<int64_t> local = per_device.at(0).dims;
    std::vector<double> values;
    for (const HostArray& a : per_device) {
      values.insert(values.end(), a.values.begin(), a.values.end());
    }
    absl::StatusOr<Array> arg =
        device_put(HostTensor(dtype, Insert(local, 0, n), values), NamedSharding(mesh, stacked));
    if (!arg.ok()) return arg.status();
    args.push_back(*std::move(arg));
    locals.push_back(local);
  }

  auto per_device = [&body, locals](const std::vector<Tracer>& xs) {
    // Each x is [1, local...]. A scalar block is taken by reduce_sum over the size-1 dimension
    // rather than reshape(x, {}), which fails to trace (see FrontendBugs.ReshapeToScalar).
    std::vector<Tracer> blocks;
    for (size_t i = 0; i < xs.size(); ++i) {
      blocks.push_back(locals[i].empty() ? lax::reduce_sum(xs[i], {0})
                                         : lax::reshape(xs[i], locals[i]));
    }
    std::vector<Tracer> results = body(blocks);
    for (Tracer& r : results) {
      if (r.valid()) r = lax::reshape(r, Insert(r.shape(), 0, 1));
    }
    return results;
  };
  ShardMapped mapped =
      shard_map(per_device, mesh, std::vector<PartitionSpec>(inputs.size(), stacked),
                std::vector<PartitionSpec>(num_results, stacked), /*check_vma=*/false);
  absl::StatusOr<std::vector<Array>> out = global_view
                                               ? jit([&mapped](const std::vector<Tracer>& xs) {
                                                   std::vector<Tracer> scaled;
                                                   for (const Tracer& x : xs)
                                                     scaled.push_back(x * 1.0);
                                                   return mapped(scaled);
                                                 }).call(args)
                                               : jit(mapped).call(args);
  if (!out.ok()) return out.status();

  DeviceResults results;
  for (const Array& a : *out) {
    absl::StatusOr<Tensor> host = a.to_host();
    if (!host.ok()) return host.status();
    const std::vector<int64_t> dims = Erase(host->dims(), 0);
    const std::vector<double> all = host->ToDoubles();
    const int64_t block = NumElements(dims);
    PerDevice devices;
    for (int64_t p = 0; p < n; ++p) {
      devices.push_back(
          {dims, std::vector<double>(all.begin() + p * block, all.begin() + (p + 1) * block)});
    }
    results.values.push_back(std::move(devices));
    results.dtypes.push_back(a.dtype());
  }
  return results;
}

::testing::AssertionResult Matches(const PerDevice& got, const PerDevice& want, double rel_tol,
                                   double abs_tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "got " << got.size() << " devices, want " << want.size();
  }
  for (size_t p = 0; p < got.size(); ++p) {
    if (got[p].dims != want[p].dims) {
      return ::testing::AssertionFailure()
             << "device " << p << ": shape [" << absl::StrJoin(got[p].dims, ",") << "], want ["
             << absl::StrJoin(want[p].dims, ",") << "]";
    }
    for (size_t e = 0; e < want[p].values.size(); ++e) {
      const double g = got[p].values[e], w = want[p].values[e];
      if (!(std::abs(g - w) <= abs_tol + rel_tol * std::abs(w))) {
        return ::testing::AssertionFailure()
               << "device " << p << " element [" << absl::StrJoin(Unravel(e, want[p].dims), ",")
               << "]: got " << g << ", want " << w << "\n  got device " << p << ":  "
               << absl::StrJoin(got[p].values, " ") << "\n  want device " << p << ": "
               << absl::StrJoin(want[p].values, " ");
      }
    }
  }
  return ::testing::AssertionSuccess();
}

std::string Describe(const AxisList& axes, const Groups& groups) {
  std::string s = "axes=(" + absl::StrJoin(axes, ",") + ")";
  if (!groups.empty()) {
    std::vector<std::string> parts;
    for (const std::vector<int64_t>& g : groups) parts.push_back("[" + absl::StrJoin(g, ",") + "]");
    absl::StrAppend(&s, " groups=[", absl::StrJoin(parts, ","), "]");
  }
  return s;
}

void PrintTo(const MeshShape& m, std::ostream* os) { *os << m.name; }

std::string MeshShapeName(const ::testing::TestParamInfo<MeshShape>& info) {
  return info.param.name;
}

std::vector<MeshShape> TestMeshShapes() {
  return {MeshShape{"i1", {{"i", 1}}},           MeshShape{"i4", {{"i", 4}}},
          MeshShape{"x2y2", {{"x", 2}, {"y", 2}}}, MeshShape{"x4y4", {{"x", 4}, {"y", 4}}},
          MeshShape{"x2y4", {{"x", 2}, {"y", 4}}}, MeshShape{"x1y8", {{"x", 1}, {"y", 8}}},
          MeshShape{"x8y8", {{"x", 8}, {"y", 8}}}};
}

std::vector<AxisList> AxisSpecs(const MeshModel& mesh) {
  std::vector<std::string> names = mesh.names();
  if (names.size() == 1) return {{names[0]}};
  return {{names[0]}, {names[1]}, {names[0], names[1]}, {names[1], names[0]}};
}

std::vector<Groups> GroupSets(int64_t n) {
  std::vector<Groups> sets = {{}};
  if (n == 1) sets.push_back({{0}});
  if (n % 2 == 0) {
    Groups pairs;
    for (int64_t i = 0; i < n; i += 2) {
      pairs.push_back((i / 2) % 2 == 0 ? std::vector<int64_t>{i, i + 1}
                                       : std::vector<int64_t>{i + 1, i});
    }
    sets.push_back(pairs);
  }
  if (n % 2 == 0 && n >= 4) {
    std::vector<int64_t> evens, odds;
    for (int64_t i = 0; i < n; i += 2) evens.push_back(i);
    for (int64_t i = n - 1; i > 0; i -= 2) odds.push_back(i);
    sets.push_back({evens, odds});
  }
  return sets;
}

void MeshTest::SetUp() {
  model_ = MeshModel(GetParam().axes);
  absl::StatusOr<Mesh> mesh = make_mesh(SharedRuntime(64), GetParam().axes);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  mesh_.emplace(*mesh);
}

}  // namespace shardjit::collectives_test
