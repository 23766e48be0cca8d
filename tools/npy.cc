#include "tools/npy.h"

#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "fmt/format.h"
#include "ir/fmt_absl.h"
#include "ir/dtype.h"
#include "ir/types.h"

namespace shardjit::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;

// A value of the header dict: a string, a bool, or a tuple of non-negative ints.
struct HeaderValue {
  enum Kind { kString, kBool, kTuple } kind = kString;
  std::string str;
  bool boolean = false;
  std::vector<int64_t> ints;
};

// Parses the Python dict literal of a .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  absl::StatusOr<std::map<std::string, HeaderValue>> ParseDict() {
    std::map<std::string, HeaderValue> dict;
    if (!Consume('{')) return Error("expected '{'");
    while (!Consume('}')) {
      ASSIGN_OR_RETURN(std::string key, String());
      if (!Consume(':')) return Error(fmt::format("expected ':' after '{}'", key));
      ASSIGN_OR_RETURN(HeaderValue value, Value(key));
      if (!dict.emplace(key, std::move(value)).second) {
        return Error(fmt::format("key '{}' appears twice", key));
      }
      if (!Consume(',')) {
        if (!Consume('}')) return Error("expected ',' or '}'");
        break;
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the dict");
    return dict;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view word) {
    SkipSpace();
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  absl::Status Error(const std::string& what) const {
    // At most 200 characters of the header, around the offset.
    constexpr size_t kShown = 200;
    const size_t from = pos_ > kShown / 2 ? pos_ - kShown / 2 : 0;
    const std::string shown = std::string(text_.substr(from, kShown));
    return absl::InvalidArgumentError(fmt::format(
        "malformed .npy header: {} at offset {} of \"{}{}{}\"", what, pos_,
        from > 0 ? "..." : "", shown, from + kShown < text_.size() ? "..." : ""));
  }

  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expected a quoted string");
    }
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  absl::StatusOr<HeaderValue> Value(const std::string& key) {
    SkipSpace();
    HeaderValue v;
    if (pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"')) {
      ASSIGN_OR_RETURN(std::string s, String());
      v.str = std::move(s);
      return v;
    }
    if (ConsumeWord("True")) {
      v.kind = HeaderValue::kBool;
      v.boolean = true;
      return v;
    }
    if (ConsumeWord("False")) {
      v.kind = HeaderValue::kBool;
      return v;
    }
    if (Consume('(')) {
      v.kind = HeaderValue::kTuple;
      while (!Consume(')')) {
        ASSIGN_OR_RETURN(int64_t n, Int());
        v.ints.push_back(n);
        if (!Consume(',')) {
          if (!Consume(')')) return Error("expected ',' or ')' in a tuple");
          break;
        }
      }
      return v;
    }
    if (pos_ < text_.size() && text_[pos_] == '[') {
      return absl::InvalidArgumentError(fmt::format(
          "unsupported .npy dtype: '{}' is a structured dtype (a list of fields)", key));
    }
    return Error(fmt::format("unsupported value for '{}'", key));
  }

  absl::StatusOr<int64_t> Int() {
    SkipSpace();
    size_t start = pos_;
    int64_t n = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (n > (std::numeric_limits<int64_t>::max() - 9) / 10) return Error("integer too large");
      n = n * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start) return Error("expected a non-negative integer");
    if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 long suffix.
    return n;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The dtype of a descr; an error lists what is supported.
absl::StatusOr<ir::DType> DTypeFromDescr(const std::string& descr) {
  if (!descr.empty() && descr[0] == '>') {
    return absl::InvalidArgumentError(fmt::format(
        "unsupported .npy dtype '{}': big-endian data is not supported", descr));
  }
  std::string_view d = descr;
  if (!d.empty() && (d[0] == '<' || d[0] == '|' || d[0] == '=')) d.remove_prefix(1);
  static constexpr std::pair<std::string_view, ir::DType> kCodes[] = {
      {"f2", ir::DType::kF16}, {"f4", ir::DType::kF32}, {"f8", ir::DType::kF64},
      {"i1", ir::DType::kS8},  {"i2", ir::DType::kS16}, {"i4", ir::DType::kS32},
      {"i8", ir::DType::kS64}, {"u1", ir::DType::kU8},  {"u2", ir::DType::kU16},
      {"u4", ir::DType::kU32}, {"u8", ir::DType::kU64}, {"b1", ir::DType::kPred}};
  for (const auto& [code, dtype] : kCodes) {
    if (d == code) return dtype;
  }
  if (d == "V2" || d == "bfloat16" || d == "bf16") return ir::DType::kBF16;
  return absl::InvalidArgumentError(fmt::format(
      "unsupported .npy dtype '{}' (supported: little-endian f2, f4, f8, i1, i2, i4, i8, u1, u2, "
      "u4, u8, '|b1' bool, and '<V2' bfloat16 as saved from ml_dtypes.bfloat16)",
      descr));
}

// The descr a dtype is written with (bf16, which .npy has no code for, is written as float32).
std::string DescrOf(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32:
    case ir::DType::kBF16:
      return "<f4";
    case ir::DType::kPred:
      return "|b1";
    case ir::DType::kS8:
      return "|i1";
    case ir::DType::kU8:
      return "|u1";
    case ir::DType::kInvalid:
      return "";
    default:
      break;
  }
  const char kind = ir::IsFloating(dtype) ? 'f' : ir::IsUnsignedInteger(dtype) ? 'u' : 'i';
  return fmt::format("<{}{}", kind, ir::DTypeSize(dtype));
}

uint32_t ReadLittleEndian(std::string_view bytes) {
  uint32_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

}  // namespace

absl::StatusOr<ir::Tensor> ParseNpy(std::string_view data) {
  if (data.size() < kMagicSize || data.substr(0, kMagicSize) != std::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError("not a .npy file (bad magic: expected \\x93NUMPY)");
  }
  if (data.size() < kMagicSize + 2) return absl::InvalidArgumentError("truncated .npy preamble");
  const int major = static_cast<unsigned char>(data[6]);
  const int minor = static_cast<unsigned char>(data[7]);
  size_t len_bytes;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;
  } else {
    return absl::InvalidArgumentError(
        fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", major,
                    minor));
  }
  const size_t preamble = kMagicSize + 2 + len_bytes;
  if (data.size() < preamble) return absl::InvalidArgumentError("truncated .npy preamble");
  const size_t header_len = ReadLittleEndian(data.substr(kMagicSize + 2, len_bytes));
  if (data.size() < preamble + header_len) {
    return absl::InvalidArgumentError(fmt::format(
        "truncated .npy header: it declares {} bytes but the file has {}", header_len,
        data.size() - preamble));
  }
  ASSIGN_OR_RETURN(auto dict, HeaderParser(data.substr(preamble, header_len)).ParseDict());

  auto get = [&](const std::string& key,
                 HeaderValue::Kind kind) -> absl::StatusOr<const HeaderValue*> {
    auto it = dict.find(key);
    if (it == dict.end()) {
      return absl::InvalidArgumentError(fmt::format("malformed .npy header: no '{}' key", key));
    }
    if (it->second.kind != kind) {
      return absl::InvalidArgumentError(
          fmt::format("malformed .npy header: '{}' has the wrong type", key));
    }
    return &it->second;
  };
  ASSIGN_OR_RETURN(const HeaderValue* descr, get("descr", HeaderValue::kString));
  ASSIGN_OR_RETURN(const HeaderValue* fortran, get("fortran_order", HeaderValue::kBool));
  ASSIGN_OR_RETURN(const HeaderValue* shape, get("shape", HeaderValue::kTuple));
  if (dict.size() != 3) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : dict) keys.push_back(k);
    return absl::InvalidArgumentError(
        fmt::format("malformed .npy header: expected keys descr, fortran_order, shape; got {}",
                    absl::StrJoin(keys, ", ")));
  }
  ASSIGN_OR_RETURN(ir::DType dtype, DTypeFromDescr(descr->str));
  if (fortran->boolean) {
    return absl::InvalidArgumentError(
        "fortran_order=True .npy files are not supported: save a C-ordered array "
        "(np.ascontiguousarray)");
  }

  ir::ShapedType type{dtype, shape->ints};
  if (absl::Status s = ir::CheckTypeLimits(type); !s.ok()) {
    return absl::InvalidArgumentError(fmt::format("shape {} is too large: {}",
                                                  type.ToString(), s.message()));
  }
  const size_t expected = static_cast<size_t>(type.byte_size());
  const size_t actual = data.size() - preamble - header_len;
  if (actual != expected) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the data has {} bytes but {} needs {}",
        actual < expected ? "truncated .npy file" : "trailing bytes in .npy file", actual,
        type.ToString(), expected));
  }
  ir::Tensor t = ir::Tensor::Empty(type);
  if (expected > 0) std::memcpy(t.data(), data.data() + preamble + header_len, expected);
  if (dtype == ir::DType::kPred) {
    uint8_t* b = t.data_as<uint8_t>();
    for (int64_t i = 0; i < type.num_elements(); ++i) b[i] = b[i] != 0;
  }
  return t;
}

std::string SerializeNpy(const ir::Tensor& tensor) {
  std::vector<std::string> dims;
  for (int64_t d : tensor.dims()) dims.push_back(std::to_string(d));
  std::string shape = "(" + absl::StrJoin(dims, ", ") + (dims.size() == 1 ? ",)" : ")");
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   DescrOf(tensor.dtype()), shape);
  // Pad with spaces and end with '\n' so that the data starts 64-byte aligned.
  size_t len_bytes = 2;
  int major = 1;
  if (header.size() + kAlignment > 65535) {  // Version 1.0 has a 16-bit header length.
    len_bytes = 4;
    major = 2;
  }
  const size_t unpadded = kMagicSize + 2 + len_bytes + header.size() + 1;
  header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  header.push_back('\n');

  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  for (size_t i = 0; i < len_bytes; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
  out += header;
  if (tensor.dtype() == ir::DType::kBF16) {
    const ir::bf16* src = tensor.data_as<ir::bf16>();
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      float f = static_cast<float>(src[i]);
      out.append(reinterpret_cast<const char*>(&f), sizeof(f));
    }
  } else if (tensor.byte_size() > 0) {
    out.append(static_cast<const char*>(tensor.data()), tensor.byte_size());
  }
  return out;
}

absl::StatusOr<ir::Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(fmt::format("cannot open .npy file \"{}\"", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<ir::Tensor> t = ParseNpy(buffer.str());
  if (!t.ok()) {
    return absl::Status(t.status().code(), fmt::format("{}: {}", path, t.status().message()));
  }
  return t;
}

absl::Status WriteNpy(const ir::Tensor& tensor, const std::string& path) {
  if (DescrOf(tensor.dtype()).empty()) {
    return absl::InvalidArgumentError(
        fmt::format("cannot write a tensor of type {} as .npy", tensor.type().ToString()));
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(fmt::format("cannot write \"{}\"", path));
  out << SerializeNpy(tensor);
  out.close();
  return out ? absl::OkStatus()
             : absl::DataLossError(fmt::format("write to \"{}\" failed", path));
}

}  // namespace shardjit::tools
