#include "ir/parser.h"

#include <cctype>
#include <cerrno>
#include <limits>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "ir/primitive.h"
#include "ir/types.h"

namespace shardjit::ir {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

enum class Tok { kIdent, kNumber, kString, kPunct, kError, kEnd };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  int line = 1;
};

class Lexer {
 public:
  explicit Lexer(std::string_view text) {
    size_t i = 0;
    int line = 1;
    while (i < text.size()) {
      char c = text[i];
      if (c == '\n') ++line;
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      if (c == '#') {  // comment to end of line
        while (i < text.size() && text[i] != '\n') ++i;
        continue;
      }
      Token t;
      t.line = line;
      size_t start = i;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (i < text.size() &&
               (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
          ++i;
        }
        t.kind = Tok::kIdent;
        t.text = std::string(text.substr(start, i - start));
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '-' && i + 1 < text.size() &&
                  (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == 'i'))) {
        ++i;
        if (c == '-' && text[i] == 'i') {  // -inf
          while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
        } else {
          while (i < text.size()) {
            char d = text[i];
            bool exp_sign = (d == '+' || d == '-') && (text[i - 1] == 'e' || text[i - 1] == 'E');
            if (std::isdigit(static_cast<unsigned char>(d)) || d == '.' || d == 'e' ||
                d == 'E' || exp_sign) {
              ++i;
            } else {
              break;
            }
          }
        }
        t.kind = Tok::kNumber;
        t.text = std::string(text.substr(start, i - start));
      } else if (c == '"') {
        ++i;
        t.kind = Tok::kString;
        while (i < text.size() && text[i] != '"') {
          if (text[i] == '\\' && i + 1 < text.size()) {
            ++i;
            t.text += text[i] == 'n' ? '\n' : text[i];
          } else {
            if (text[i] == '\n') ++line;
            t.text += text[i];
          }
          ++i;
        }
        if (i >= text.size()) {  // no closing quote
          t.kind = Tok::kError;
          t.text = "unterminated string";
        }
        ++i;
      } else {
        t.kind = Tok::kPunct;
        t.text = std::string(1, c);
        ++i;
      }
      tokens_.push_back(std::move(t));
    }
    Token end;
    end.line = line;
    tokens_.push_back(end);
  }

  const Token& Peek(int ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  Token Next() {
    Token t = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool IsPunct(std::string_view p, int ahead = 0) const {
    return Peek(ahead).kind == Tok::kPunct && Peek(ahead).text == p;
  }
  bool IsIdent(std::string_view s, int ahead = 0) const {
    return Peek(ahead).kind == Tok::kIdent && Peek(ahead).text == s;
  }

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : lex_(text) {}

  absl::StatusOr<ir::Module> ParseModuleText() {
    ir::Module m;
    RETURN_IF_ERROR(ExpectIdent("module"));
    ASSIGN_OR_RETURN(std::string name, Name());
    m.set_name(name);
    RETURN_IF_ERROR(Header(m));
    while (lex_.IsIdent("func")) {
      lex_.Next();
      ir::Function* f = m.add_functions();
      ASSIGN_OR_RETURN(std::string fname, Name());
      f->set_name(fname);
      RETURN_IF_ERROR(Expect("="));
      next_id_ = 0;
      scopes_.clear();
      RETURN_IF_ERROR(Region(f->mutable_body()));
    }
    if (lex_.Peek().kind != Tok::kEnd) return Error("expected `func` or end of input");
    return m;
  }

  absl::StatusOr<ir::Region> TopRegion() {
    ir::Region r;
    RETURN_IF_ERROR(Region(&r));
    if (lex_.Peek().kind != Tok::kEnd) return Error("unexpected text after the region");
    return r;
  }

 private:
  template <typename... Args>
  absl::Status Error(fmt::format_string<Args...> f, Args&&... args) {
    const Token& t = lex_.Peek();
    return absl::InvalidArgumentError(
        fmt::format("IR text line {}: {} (at \"{}\")", t.line,
                    fmt::format(f, std::forward<Args>(args)...),
                    t.kind == Tok::kEnd ? "end of input" : t.text));
  }
  // An error about the name just read.
  template <typename... Args>
  absl::Status NameError(fmt::format_string<Args...> f, Args&&... args) {
    return absl::InvalidArgumentError(fmt::format(
        "IR text line {}: {}", last_name_line_, fmt::format(f, std::forward<Args>(args)...)));
  }

  absl::Status Expect(std::string_view p) {
    if (!lex_.IsPunct(p)) return Error("expected \"{}\"", p);
    lex_.Next();
    return absl::OkStatus();
  }
  absl::Status ExpectIdent(std::string_view s) {
    if (!lex_.IsIdent(s)) return Error("expected \"{}\"", s);
    lex_.Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Name() {
    const Token& t = lex_.Peek();
    if (t.kind != Tok::kIdent && t.kind != Tok::kString) return Error("expected a name");
    last_name_line_ = t.line;
    return lex_.Next().text;
  }
  absl::StatusOr<int64_t> Int() {
    const Token& t = lex_.Peek();
    if (t.kind != Tok::kNumber) return Error("expected an integer");
    char* end = nullptr;
    std::string text = lex_.Next().text;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE) return Error("bad integer \"{}\"", text);
    return static_cast<int64_t>(v);
  }
  absl::StatusOr<uint64_t> Unsigned() {
    const Token& t = lex_.Peek();
    if (t.kind != Tok::kNumber) return Error("expected an unsigned integer");
    std::string text = lex_.Next().text;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (text[0] == '-' || *end != '\0' || errno == ERANGE) {
      return Error("bad unsigned integer \"{}\"", text);
    }
    return static_cast<uint64_t>(v);
  }
  absl::StatusOr<double> Double() {
    const Token& t = lex_.Peek();
    if (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan")) {
      return std::strtod(lex_.Next().text.c_str(), nullptr);
    }
    if (t.kind != Tok::kNumber) return Error("expected a number");
    std::string text = lex_.Next().text;
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (*end != '\0') return Error("bad number \"{}\"", text);
    return v;
  }

  // ( item , item ... ) with `item` parsing one element.
  template <typename F>
  absl::Status Tuple(F item) {
    RETURN_IF_ERROR(Expect("("));
    while (!lex_.IsPunct(")")) {
      RETURN_IF_ERROR(item());
      if (lex_.IsPunct(",")) {
        lex_.Next();
      } else if (!lex_.IsPunct(")")) {
        return Error("expected \",\" or \")\"");
      }
    }
    lex_.Next();
    return absl::OkStatus();
  }

  // `in_ref`: the array type inside `ref[...]`, which may be a semaphore array.
  absl::StatusOr<TensorType> Type(bool in_ref = false) {
    if (lex_.Peek().kind != Tok::kIdent) return Error("expected a type like f32[2,3]");
    if (lex_.Peek().text == "future" || lex_.Peek().text == "ref") {
      const bool future = lex_.Next().text == "future";
      RETURN_IF_ERROR(Expect("["));
      ASSIGN_OR_RETURN(TensorType inner, Type(/*in_ref=*/!future));
      if (inner.future() || inner.ref()) {
        return Error("a {} holds an array type, not another future or ref",
                     future ? "future" : "ref");
      }
      RETURN_IF_ERROR(Expect("]"));
      if (future) {
        inner.set_future(true);
      } else {
        inner.set_ref(true);
      }
      return inner;
    }
    std::string dtype = lex_.Next().text;
    TensorType t;
    if (dtype == "sem" || dtype == "dma_sem") {
      if (!in_ref) return Error("{}[...] is a semaphore array: only a ref holds one", dtype);
      t.set_dtype(S32);
      t.set_semaphore(dtype == "sem" ? REGULAR_SEMAPHORE : DMA_SEMAPHORE);
    } else {
      std::optional<DType> d = ParseDType(dtype);
      if (!d) return Error("unknown dtype \"{}\"", dtype);
      t.set_dtype(ToProto(*d));
    }
    RETURN_IF_ERROR(Expect("["));
    while (!lex_.IsPunct("]")) {
      ASSIGN_OR_RETURN(int64_t v, Int());
      t.add_dims(v);
      if (lex_.IsPunct(",")) lex_.Next();
    }
    lex_.Next();
    return t;
  }

  absl::StatusOr<int64_t> Define(const std::string& name) {
    for (const auto& scope : scopes_) {
      if (scope.count(name)) return NameError("value \"{}\" is defined twice", name);
    }
    int64_t id = next_id_++;
    scopes_.back()[name] = id;
    return id;
  }
  absl::StatusOr<int64_t> Use(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return NameError("value \"{}\" is not defined", name);
  }

  absl::Status Region(ir::Region* r) {
    // Each nested region recurses: bounded, so that deep input cannot exhaust the stack.
    if (scopes_.size() >= static_cast<size_t>(kMaxRegionDepth)) {
      return Error("regions nested more than {} deep", kMaxRegionDepth);
    }
    RETURN_IF_ERROR(Expect("{"));
    RETURN_IF_ERROR(ExpectIdent("lambda"));
    RETURN_IF_ERROR(Expect(";"));
    scopes_.emplace_back();
    while (!lex_.IsPunct(".")) {
      ASSIGN_OR_RETURN(std::string name, Name());
      RETURN_IF_ERROR(Expect(":"));
      ASSIGN_OR_RETURN(TensorType type, Type());
      ASSIGN_OR_RETURN(int64_t id, Define(name));
      Param* p = r->add_params();
      p->set_id(id);
      *p->mutable_type() = type;
    }
    lex_.Next();
    RETURN_IF_ERROR(ExpectIdent("let"));
    while (!lex_.IsIdent("in")) {
      RETURN_IF_ERROR(OpLine(r->add_ops()));
    }
    lex_.Next();
    RETURN_IF_ERROR(Tuple([&]() -> absl::Status {
      ASSIGN_OR_RETURN(std::string name, Name());
      ASSIGN_OR_RETURN(int64_t id, Use(name));
      r->add_results(id);
      return absl::OkStatus();
    }));
    scopes_.pop_back();
    return Expect("}");
  }

  bool AtOpStart() const {
    return lex_.IsIdent("in") || lex_.IsPunct("@") ||
           (lex_.Peek().kind == Tok::kIdent && lex_.IsPunct(":", 1)) ||
           (lex_.IsIdent("_") && lex_.IsPunct("=", 1)) || lex_.Peek().kind == Tok::kEnd;
  }

  absl::Status OpLine(ir::Op* op) {
    std::vector<std::string> result_names;
    if (lex_.IsIdent("_") && lex_.IsPunct("=", 1)) {
      lex_.Next();
    } else {
      while (!lex_.IsPunct("=")) {
        ASSIGN_OR_RETURN(std::string name, Name());
        RETURN_IF_ERROR(Expect(":"));
        ASSIGN_OR_RETURN(TensorType type, Type());
        result_names.push_back(name);
        *op->add_result_types() = type;
      }
    }
    RETURN_IF_ERROR(Expect("="));
    if (lex_.Peek().kind != Tok::kIdent) return Error("expected an opcode");
    op->set_opcode(lex_.Next().text);
    if (lex_.IsPunct("[")) {
      lex_.Next();
      RETURN_IF_ERROR(Attrs(op));
    }
    while (!AtOpStart()) {
      ASSIGN_OR_RETURN(std::string name, Name());
      ASSIGN_OR_RETURN(int64_t id, Use(name));
      op->add_operands(id);
    }
    while (lex_.IsPunct("@")) {
      lex_.Next();
      if (lex_.IsIdent("scope")) {
        lex_.Next();
        RETURN_IF_ERROR(Expect("("));
        ASSIGN_OR_RETURN(std::string scope, Name());
        op->set_name_scope(scope);
        RETURN_IF_ERROR(Expect(")"));
      } else if (lex_.IsIdent("sharding")) {
        lex_.Next();
        RETURN_IF_ERROR(Tuple([&] { return Spec(op->add_sharding()); }));
      } else if (lex_.IsIdent("loc")) {
        lex_.Next();
        RETURN_IF_ERROR(Expect("("));
        ASSIGN_OR_RETURN(std::string file, Name());
        RETURN_IF_ERROR(Expect(","));
        ASSIGN_OR_RETURN(int64_t line, Int());
        if (line < 0 || line > std::numeric_limits<int32_t>::max()) {
          return Error("bad integer: line {} of @loc is out of range", line);
        }
        op->mutable_loc()->set_file(file);
        op->mutable_loc()->set_line(static_cast<int32_t>(line));
        RETURN_IF_ERROR(Expect(")"));
      } else {
        return Error("expected @scope, @sharding or @loc");
      }
    }
    // Results are defined after the op's regions, in print order.
    for (const std::string& name : result_names) {
      ASSIGN_OR_RETURN(int64_t id, Define(name));
      op->add_results(id);
    }
    return absl::OkStatus();
  }

  absl::Status Attrs(ir::Op* op) {
    const FieldDescriptor* chosen = AttrField(op->opcode());
    if (chosen == nullptr) return Error("\"{}\" is not a primitive with attributes", op->opcode());
    Message* attrs = op->GetReflection()->MutableMessage(op, chosen);
    while (!lex_.IsPunct("]")) {
      ASSIGN_OR_RETURN(std::string name, Name());
      const FieldDescriptor* f = attrs->GetDescriptor()->FindFieldByName(name);
      if (f == nullptr) return Error("{} has no attribute \"{}\"", op->opcode(), name);
      RETURN_IF_ERROR(Expect("="));
      RETURN_IF_ERROR(FieldValue(attrs, f));
    }
    lex_.Next();
    return absl::OkStatus();
  }

  // The attribute field of a registered primitive; nullptr when it has none or is unknown.
  static const FieldDescriptor* AttrField(const std::string& opcode) {
    const Primitive* p = FindPrimitive(opcode);
    if (p == nullptr || p->attrs_case == ir::Op::ATTRS_NOT_SET) return nullptr;
    return ir::Op::descriptor()->FindFieldByNumber(p->attrs_case);
  }

  absl::Status FieldValue(Message* m, const FieldDescriptor* f) {
    if (!f->is_repeated()) return Scalar(m, f);
    return Tuple([&] { return Scalar(m, f); });
  }

  absl::Status Scalar(Message* m, const FieldDescriptor* f) {
    const Reflection* r = m->GetReflection();
    bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_INT32: {
        ASSIGN_OR_RETURN(int64_t v, Int());
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
          rep ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
        } else {
          if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
            return Error("{} = {} does not fit in 32 bits", f->name(), v);
          }
          rep ? r->AddInt32(m, f, static_cast<int32_t>(v))
              : r->SetInt32(m, f, static_cast<int32_t>(v));
        }
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        ASSIGN_OR_RETURN(uint64_t v, Unsigned());
        rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        bool v;
        if (lex_.IsIdent("True")) {
          v = true;
        } else if (lex_.IsIdent("False")) {
          v = false;
        } else {
          return Error("expected True or False");
        }
        lex_.Next();
        rep ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        ASSIGN_OR_RETURN(double v, Double());
        rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        ASSIGN_OR_RETURN(std::string v, Name());
        rep ? r->AddString(m, f, v) : r->SetString(m, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        if (lex_.Peek().kind != Tok::kIdent) return Error("expected an enum value");
        std::string text = lex_.Next().text;
        int v = -1;
        if (f->enum_type() == DTypeProto_descriptor()) {
          if (text == "None") {
            v = 0;
          } else if (std::optional<DType> d = ParseDType(text)) {
            v = static_cast<int>(*d);
          }
        } else if (const auto* ev = f->enum_type()->FindValueByName(text)) {
          v = ev->number();
        }
        if (v < 0) return Error("bad value \"{}\" for {}", text, f->name());
        rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
        return absl::OkStatus();
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return MessageValue(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f));
      default:
        return Error("unsupported attribute field {}", f->name());
    }
  }

  absl::Status MessageValue(Message* m) {
    const auto* d = m->GetDescriptor();
    if (d == ir::Region::descriptor()) return Region(static_cast<ir::Region*>(m));
    if (d == PartitionSpec::descriptor()) return Spec(static_cast<PartitionSpec*>(m));
    if (d == TensorType::descriptor()) {
      ASSIGN_OR_RETURN(*static_cast<TensorType*>(m), Type());
      return absl::OkStatus();
    }
    if (d == BlockSpec::descriptor()) {
      auto* spec = static_cast<BlockSpec*>(m);
      if (lex_.IsIdent("ANY")) {
        lex_.Next();
        spec->set_whole(true);
        return absl::OkStatus();
      }
      int i = 0;
      return Tuple([&]() -> absl::Status {
        if (i >= 2) return Error("a BlockSpec is (block_shape,{{index_map}}) or ANY");
        return FieldValue(m, d->FindFieldByName(i++ == 0 ? "block_shape" : "index_map"));
      });
    }
    if (d->field_count() == 1 && d->field(0)->is_repeated()) return FieldValue(m, d->field(0));
    int i = 0;
    return Tuple([&]() -> absl::Status {
      if (i >= d->field_count()) return Error("too many entries for {}", d->name());
      return FieldValue(m, d->field(i++));
    });
  }

  absl::Status Spec(PartitionSpec* spec) {
    if (!lex_.IsIdent("P")) return Error("expected a PartitionSpec P(...)");
    lex_.Next();
    return Tuple([&]() -> absl::Status {
      DimSpec* dim = spec->add_dims();
      if (lex_.IsIdent("None")) {
        lex_.Next();
        return absl::OkStatus();
      }
      if (lex_.IsPunct("(")) {
        return Tuple([&]() -> absl::Status {
          ASSIGN_OR_RETURN(std::string axis, Name());
          dim->add_axes(axis);
          return absl::OkStatus();
        });
      }
      ASSIGN_OR_RETURN(std::string axis, Name());
      dim->add_axes(axis);
      return absl::OkStatus();
    });
  }

  absl::Status Header(ir::Module& m) {
    RETURN_IF_ERROR(Expect("["));
    while (!lex_.IsPunct("]")) {
      ASSIGN_OR_RETURN(std::string key, Name());
      RETURN_IF_ERROR(Expect("="));
      absl::Status s;
      if (key == "view") {
        ASSIGN_OR_RETURN(std::string v, Name());
        if (v == "global") {
          m.set_view(GLOBAL);
        } else if (v == "per_device") {
          m.set_view(PER_DEVICE);
        } else {
          return Error("view must be global or per_device");
        }
      } else if (key == "mesh") {
        s = Expect("{");
        while (s.ok() && !lex_.IsPunct("}")) {
          ASSIGN_OR_RETURN(std::string axis, Name());
          RETURN_IF_ERROR(Expect(":"));
          ASSIGN_OR_RETURN(int64_t size, Int());
          MeshAxis* a = m.mutable_mesh()->add_axes();
          a->set_name(axis);
          a->set_size(size);
          if (lex_.IsPunct(",")) lex_.Next();
        }
        if (s.ok()) s = Expect("}");
      } else if (key == "devices") {
        s = Tuple([&]() -> absl::Status {
          ASSIGN_OR_RETURN(int64_t v, Int());
          m.mutable_mesh()->add_device_ids(v);
          return absl::OkStatus();
        });
      } else if (key == "entry") {
        ASSIGN_OR_RETURN(std::string v, Name());
        m.set_entry(v);
      } else if (key == "param_shardings" || key == "result_shardings") {
        auto* list =
            key == "param_shardings" ? m.mutable_param_shardings() : m.mutable_result_shardings();
        s = Tuple([&] { return Spec(list->Add()); });
      } else if (key == "position_functions") {
        s = Tuple([&]() -> absl::Status {
          ASSIGN_OR_RETURN(std::string v, Name());
          m.add_position_functions(v);
          return absl::OkStatus();
        });
      } else if (key == "machine_model") {
        s = MessageValue(m.mutable_machine_model());
      } else {
        return Error("unknown module attribute \"{}\"", key);
      }
      if (!s.ok()) return s;
    }
    lex_.Next();
    return absl::OkStatus();
  }

  Lexer lex_;
  int last_name_line_ = 1;
  int64_t next_id_ = 0;
  std::vector<std::map<std::string, int64_t>> scopes_;
};

}  // namespace
}  // namespace shardjit::ir

namespace shardjit::ir {

absl::StatusOr<Module> ParseModule(std::string_view text) { return Parser(text).ParseModuleText(); }

absl::StatusOr<Region> ParseRegion(std::string_view text) { return Parser(text).TopRegion(); }

}  // namespace shardjit::ir
