// Tests of the .npy reader and writer: round trips, the exact bytes of a small file, and
// rejection of malformed files.
#include "tools/npy.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace shardjit::tools {
namespace {

using ::testing::HasSubstr;
using ir::DType;
using ir::Tensor;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// A .npy file from a header dict and raw data bytes (version 1.0, padded like numpy does).
std::string NpyBytes(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict;
  size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

void ExpectSameTensor(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.type(), b.type());
  ASSERT_EQ(a.byte_size(), b.byte_size());
  if (a.byte_size() > 0) EXPECT_EQ(std::memcmp(a.data(), b.data(), a.byte_size()), 0);
}

TEST(NpyTest, RoundTripsEveryDtypeAndShape) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 3, 2}};
  for (DType dtype : ir::kAllDTypes) {
    if (dtype == DType::kBF16) continue;  // written as f32 (below)
    for (const std::vector<int64_t>& dims : shapes) {
      Tensor t = Tensor::Empty({dtype, dims});
      // Every byte pattern of the integers (the 64-bit ends included); exact floats.
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        if (dtype == DType::kPred) {
          t.SetDouble(i, i % 3 == 0);
        } else if (ir::IsFloating(dtype)) {
          t.SetDouble(i, (i - 2.5) * 1.5);
        } else {
          for (int64_t b = 0; b < ir::DTypeSize(dtype); ++b) {
            t.data_as<uint8_t>()[i * ir::DTypeSize(dtype) + b] = static_cast<uint8_t>(0x81 + 37 * i + b);
          }
        }
      }
      SCOPED_TRACE(t.type().ToString());
      std::string path = TempPath("round_trip.npy");
      ASSERT_TRUE(WriteNpy(t, path).ok());
      absl::StatusOr<Tensor> back = ReadNpy(path);
      ASSERT_TRUE(back.ok()) << back.status();
      ExpectSameTensor(t, *back);
    }
  }
}

TEST(NpyTest, Bf16IsWrittenAsFloat32AndReadFromV2) {
  Tensor t = Tensor::FromDoubles({DType::kBF16, {2, 2}}, {1.0, -2.5, 0.15625, 3e38});
  absl::StatusOr<Tensor> as_f32 = ParseNpy(SerializeNpy(t));
  ASSERT_TRUE(as_f32.ok()) << as_f32.status();
  EXPECT_EQ(as_f32->type(), (ir::ShapedType{DType::kF32, {2, 2}}));
  EXPECT_EQ(as_f32->ToDoubles(), t.ToDoubles());

  // np.save of an ml_dtypes.bfloat16 array writes descr '<V2' and the raw 16-bit values.
  std::string bits(reinterpret_cast<const char*>(t.data()), t.byte_size());
  for (const char* descr : {"<V2", "|V2", "bfloat16"}) {
    absl::StatusOr<Tensor> bf = ParseNpy(NpyBytes(
        std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2, 2), }",
        bits));
    ASSERT_TRUE(bf.ok()) << descr << ": " << bf.status();
    ExpectSameTensor(t, *bf);
  }
}

TEST(NpyTest, WritesTheSpecBytes) {
  Tensor t = Tensor::FromDoubles({DType::kF32, {2}}, {1.0, -2.0});
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string expected("\x93NUMPY\x01\x00", 8);
  // The dict is 57 bytes: padded to 118 so that the data starts at byte 128 (as numpy does).
  ASSERT_EQ(header.size(), 57u);
  expected += std::string("\x76\x00", 2);  // header length 118, little endian
  expected += header + std::string(118 - 57 - 1, ' ') + "\n";
  expected += std::string("\x00\x00\x80\x3f", 4);  // 1.0f
  expected += std::string("\x00\x00\x00\xc0", 4);  // -2.0f
  EXPECT_EQ(SerializeNpy(t), expected);

  // A scalar int32 and a bool vector.
  EXPECT_THAT(SerializeNpy(Tensor::FromDoubles({DType::kS32, {}}, {7})),
              HasSubstr("{'descr': '<i4', 'fortran_order': False, 'shape': (), }"));
  EXPECT_THAT(SerializeNpy(Tensor::FromDoubles({DType::kPred, {3, 1}}, {1, 0, 1})),
              HasSubstr("{'descr': '|b1', 'fortran_order': False, 'shape': (3, 1), }"));
  // numpy's codes of the other dtypes.
  const std::pair<DType, const char*> descrs[] = {
      {DType::kF16, "'<f2'"}, {DType::kF64, "'<f8'"}, {DType::kS8, "'|i1'"},
      {DType::kU8, "'|u1'"},  {DType::kS16, "'<i2'"}, {DType::kU16, "'<u2'"},
      {DType::kS64, "'<i8'"}, {DType::kU32, "'<u4'"}, {DType::kU64, "'<u8'"}};
  for (const auto& [dtype, descr] : descrs) {
    EXPECT_THAT(SerializeNpy(Tensor::FromDoubles({dtype, {1}}, {1})),
                HasSubstr(std::string("'descr': ") + descr));
  }
}

TEST(NpyTest, ReadsHandWrittenFiles) {
  // Double quotes, no trailing comma, other key order, version 2.0, Python 2 long suffix.
  std::string data("\x01\x00\x00\x00\xfe\xff\xff\xff", 8);
  absl::StatusOr<Tensor> t = ParseNpy(
      NpyBytes("{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<i4\"}", data, 2));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->type(), (ir::ShapedType{DType::kS32, {2}}));
  EXPECT_EQ(t->ToDoubles(), (std::vector<double>{1, -2}));

  // Bool bytes other than 0/1 read as true.
  absl::StatusOr<Tensor> b = ParseNpy(NpyBytes(
      "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x01\x07", 3)));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ToDoubles(), (std::vector<double>{0, 1, 1}));
}

void ExpectRejected(const std::string& bytes, const std::string& message) {
  absl::StatusOr<Tensor> t = ParseNpy(bytes);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(message));
}

TEST(NpyTest, RejectsMalformedFiles) {
  const std::string f32x2(8, '\0');
  ExpectRejected("", "bad magic");
  ExpectRejected("\x89PNG\r\n\x1a\n....", "bad magic");
  ExpectRejected(std::string("\x93NUMPY\x09\x00", 8) + "xx", "format version 9.0");
  ExpectRejected(std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{", "truncated .npy header");
  ExpectRejected(NpyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                          f32x2 + f32x2),
                 "unsupported .npy dtype '<c8'");
  ExpectRejected(NpyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f32x2),
                 "big-endian");
  ExpectRejected(NpyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                          f32x2),
                 "structured dtype");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32x2),
                 "fortran_order=True");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'shape': (2,), }", f32x2), "no 'fortran_order'");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': 2, }", f32x2),
                 "malformed .npy header");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", f32x2),
                 "malformed .npy header");
  ExpectRejected(NpyBytes("{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }", f32x2),
                 "malformed .npy header");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                          f32x2),
                 "malformed .npy header");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32x2),
                 "truncated .npy file: the data has 8 bytes but f32[3] needs 12");
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32x2),
                 "trailing bytes");
  // Shapes past the limits of ir/types.h: too many bytes (in any order of dims, an empty array's
  // other dims included, so its strides cannot overflow) and too high a rank.
  for (const char* shape : {"(1099511627776, 1099511627776, 0)", "(0, 1099511627776, 1099511627776)",
                            "(0, 33, 3, 3343, 334, 3343, 3, 3343, 33458, 37)"}) {
    ExpectRejected(NpyBytes(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") +
                                shape + ", }",
                            ""),
                   "too large");
  }
  std::string rank33;
  for (int i = 0; i < 33; ++i) rank33 += "1, ";
  ExpectRejected(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (" + rank33 + "), }",
                          std::string(4, '\0')),
                 "has rank 33, more than 32");
  // A huge malformed header is quoted in part only.
  absl::StatusOr<Tensor> junk =
      ParseNpy(std::string("\x93NUMPY\x01\x00\xff\xff", 10) + std::string(65535, '{'));
  ASSERT_FALSE(junk.ok());
  EXPECT_LT(junk.status().message().size(), 400u) << junk.status();
  EXPECT_THAT(std::string(junk.status().message()), HasSubstr("{{{..."));
}

TEST(NpyTest, ReadErrorsNameTheFile) {
  absl::StatusOr<Tensor> missing = ReadNpy(TempPath("does_not_exist.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("does_not_exist.npy"));

  std::string path = TempPath("not_npy.npy");
  std::ofstream(path) << "hello";
  absl::StatusOr<Tensor> bad = ReadNpy(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not_npy.npy: not a .npy file"));
}

}  // namespace
}  // namespace shardjit::tools
