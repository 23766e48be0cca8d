#include "ir/printer.h"

#include <cmath>

#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "ir/types.h"

namespace shardjit::ir {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return s != "None" && s != "True" && s != "False";
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string StringValue(const std::string& s) { return IsIdentifier(s) ? s : Quote(s); }

std::string DoubleValue(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::string TypeText(const TensorType& t) { return FromProto(t).ToString(); }

class Printer {
 public:
  explicit Printer(const PrintOptions& options) : options_(options) {}

  std::string Region(const ir::Region& region, int indent) {
    std::string pad(indent, ' ');
    std::vector<std::string> params;
    for (const Param& p : region.params()) {
      params.push_back(fmt::format("{}:{}", ValueName(p.id()), TypeText(p.type())));
    }
    std::string out = fmt::format("{{ lambda ; {}. let\n", absl::StrJoin(params, " "));
    for (const ir::Op& op : region.ops()) {
      out += std::string(indent + 4, ' ') + Op(op, indent + 4) + "\n";
    }
    std::vector<std::string> results;
    for (int64_t id : region.results()) results.push_back(ValueName(id));
    out += fmt::format("{}  in ({}) }}", pad, absl::StrJoin(results, ", "));
    return out;
  }

  std::string Op(const ir::Op& op, int indent) {
    std::vector<std::string> results;
    for (int i = 0; i < op.results_size(); ++i) {
      results.push_back(fmt::format("{}:{}", ValueName(op.results(i)),
                                    i < op.result_types_size() ? TypeText(op.result_types(i))
                                                               : "?"));
    }
    std::string out = results.empty() ? "_" : absl::StrJoin(results, " ");
    out += " = " + op.opcode();
    if (op.attrs_case() != ir::Op::ATTRS_NOT_SET) {
      const Reflection* r = op.GetReflection();
      const FieldDescriptor* f = op.GetDescriptor()->FindFieldByNumber(op.attrs_case());
      out += "[" + Fields(r->GetMessage(op, f), indent) + "]";
    }
    for (int64_t id : op.operands()) out += " " + ValueName(id);
    if (!op.name_scope().empty()) out += " @scope(" + Quote(op.name_scope()) + ")";
    if (op.sharding_size() > 0) {
      std::vector<std::string> specs;
      for (const PartitionSpec& s : op.sharding()) specs.push_back(MessageValue(s, indent));
      out += " @sharding(" + absl::StrJoin(specs, ",") + ")";
    }
    if (options_.locations && op.has_loc()) {
      out += fmt::format(" @loc({}, {})", Quote(op.loc().file()), op.loc().line());
    }
    return out;
  }

  // `name=value` for each field that is set (repeated fields that are empty are left out).
  std::string Fields(const Message& m, int indent) {
    const Reflection* r = m.GetReflection();
    std::vector<std::string> parts;
    for (int i = 0; i < m.GetDescriptor()->field_count(); ++i) {
      const FieldDescriptor* f = m.GetDescriptor()->field(i);
      if (f->is_repeated() && r->FieldSize(m, f) == 0) continue;
      // Optional scalars (proto3 `optional`) print only when set.
      if (!f->is_repeated() && f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE &&
          f->has_presence() && !r->HasField(m, f)) {
        continue;
      }
      parts.push_back(f->name() + "=" + FieldValue(m, f, indent));
    }
    return absl::StrJoin(parts, " ");
  }

  std::string FieldValue(const Message& m, const FieldDescriptor* f, int indent) {
    const Reflection* r = m.GetReflection();
    if (!f->is_repeated()) return Scalar(m, f, -1, indent);
    std::vector<std::string> items;
    for (int i = 0; i < r->FieldSize(m, f); ++i) items.push_back(Scalar(m, f, i, indent));
    return "(" + absl::StrJoin(items, ",") + ")";
  }

  // Field `f` of `m` (element `index` when repeated, -1 otherwise).
  std::string Scalar(const Message& m, const FieldDescriptor* f, int index, int indent) {
    const Reflection* r = m.GetReflection();
    bool rep = index >= 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT64:
        return fmt::format("{}", rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      case FieldDescriptor::CPPTYPE_INT32:
        return fmt::format("{}", rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      case FieldDescriptor::CPPTYPE_UINT64:
        return fmt::format("{}", rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
      case FieldDescriptor::CPPTYPE_BOOL:
        return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "True" : "False";
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return DoubleValue(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      case FieldDescriptor::CPPTYPE_STRING:
        return StringValue(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
      case FieldDescriptor::CPPTYPE_ENUM: {
        int v = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
        if (f->enum_type() == DTypeProto_descriptor()) {
          return v == 0 ? "None" : std::string(DTypeName(static_cast<DType>(v)));
        }
        const auto* ev = f->enum_type()->FindValueByNumber(v);
        return ev ? ev->name() : fmt::format("{}", v);
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return MessageValue(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f),
                            indent);
      default:
        return "?";
    }
  }

  std::string MessageValue(const Message& m, int indent) {
    if (m.GetDescriptor() == ir::Region::descriptor()) {
      return Region(static_cast<const ir::Region&>(m), indent + 2);
    }
    if (m.GetDescriptor() == TensorType::descriptor()) {
      return TypeText(static_cast<const TensorType&>(m));
    }
    if (m.GetDescriptor() == BlockSpec::descriptor()) {
      // ANY (the whole array), or (block_shape,{index_map}).
      const auto& spec = static_cast<const BlockSpec&>(m);
      if (spec.whole()) return "ANY";
      const auto* d = m.GetDescriptor();
      return "(" + FieldValue(m, d->FindFieldByName("block_shape"), indent) + "," +
             FieldValue(m, d->FindFieldByName("index_map"), indent) + ")";
    }
    if (m.GetDescriptor() == PartitionSpec::descriptor()) {
      const auto& spec = static_cast<const PartitionSpec&>(m);
      std::vector<std::string> dims;
      for (const DimSpec& d : spec.dims()) {
        if (d.axes().empty()) {
          dims.push_back("None");
        } else if (d.axes_size() == 1) {
          dims.push_back(StringValue(d.axes(0)));
        } else {
          std::vector<std::string> axes;
          for (const std::string& a : d.axes()) axes.push_back(StringValue(a));
          dims.push_back("(" + absl::StrJoin(axes, ",") + ")");
        }
      }
      return "P(" + absl::StrJoin(dims, ",") + ")";
    }
    const auto* d = m.GetDescriptor();
    if (d->field_count() == 1 && d->field(0)->is_repeated()) {
      return FieldValue(m, d->field(0), indent);
    }
    std::vector<std::string> items;
    for (int i = 0; i < d->field_count(); ++i) items.push_back(FieldValue(m, d->field(i), indent));
    return "(" + absl::StrJoin(items, ",") + ")";
  }

 private:
  const PrintOptions& options_;
};

}  // namespace

std::string ValueName(int64_t id) {
  std::string name;
  int64_t n = id;
  do {
    name.insert(name.begin(), static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n > 0);
  if (name == "in" || name == "let" || name == "lambda") name += "_";
  return name;
}

std::string PrintRegion(const Region& region, int indent, const PrintOptions& options) {
  return Printer(options).Region(region, indent);
}

std::string PrintOp(const Op& op, int indent, const PrintOptions& options) {
  return Printer(options).Op(op, indent);
}

std::string PrintFunction(const Function& function, const PrintOptions& options) {
  return fmt::format("func {} = {}\n", StringValue(function.name()),
                     PrintRegion(function.body(), 0, options));
}

std::string PrintModule(const Module& module, const PrintOptions& options) {
  Printer printer(options);
  std::vector<std::string> header;
  header.push_back("view=" + std::string(module.view() == PER_DEVICE ? "per_device"
                                         : module.view() == GLOBAL   ? "global"
                                                                     : "invalid"));
  std::vector<std::string> axes;
  for (const MeshAxis& a : module.mesh().axes()) {
    axes.push_back(fmt::format("{}:{}", StringValue(a.name()), a.size()));
  }
  header.push_back("mesh={" + absl::StrJoin(axes, ",") + "}");
  header.push_back("devices=(" + absl::StrJoin(module.mesh().device_ids(), ",") + ")");
  header.push_back("entry=" + StringValue(module.entry()));
  auto specs = [&](const auto& list) {
    std::vector<std::string> items;
    for (const PartitionSpec& s : list) items.push_back(printer.MessageValue(s, 0));
    return "(" + absl::StrJoin(items, ",") + ")";
  };
  header.push_back("param_shardings=" + specs(module.param_shardings()));
  header.push_back("result_shardings=" + specs(module.result_shardings()));
  if (module.position_functions_size() > 0) {
    std::vector<std::string> names;
    for (const std::string& f : module.position_functions()) names.push_back(StringValue(f));
    header.push_back("position_functions=(" + absl::StrJoin(names, ",") + ")");
  }
  if (module.has_machine_model()) {
    header.push_back("machine_model=" + printer.MessageValue(module.machine_model(), 0));
  }
  std::string out =
      fmt::format("module {} [{}]\n", StringValue(module.name()), absl::StrJoin(header, " "));
  for (const Function& f : module.functions()) out += PrintFunction(f, options);
  return out;
}

}  // namespace shardjit::ir
