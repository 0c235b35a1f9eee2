// Safetensors reader / writer and dtype conversion: round trips, f32 views
// into the mapping, bf16 / f16 conversion, and rejection (INVALID_ARGUMENT
// naming file and tensor) of every malformed header we can think of.
#include "engine/weights/safetensors.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "engine/weights/safetensors_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dtype.h"
#include "kernels/immutable_host_regions.h"
#include "tests/engine/test_model_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using ::testing::HasSubstr;

// A file from a literal JSON header and `data_bytes` bytes of data.
std::string RawFile(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\x01');
}

absl::Status ParseStatus(const std::string& file) {
  return ParseSafetensorsHeader(file, "test.safetensors").status();
}

TEST(DTypeTest, ConvertsHalfFormats) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xc040), -3.0f);
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_EQ(ParseFloatDType("BF16"), DType::kBF16);
  EXPECT_EQ(ParseFloatDType("I64"), std::nullopt);
}

TEST(SafetensorsTest, WriteThenReadRoundTrips) {
  testing::TempDir dir;
  Tensor a = Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::FromVector({1}, {-7.5f});
  Tensor empty = Tensor::Zeros({0, 4});
  const std::string path = dir.Sub("w.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"b", &b}, {"a", &a}, {"e", &empty}},
                               {{"format", "pt"}})
                  .ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_OK(file);
  ASSERT_EQ((*file)->entries().size(), 3u);
  EXPECT_EQ((*file)->entries()[0].name, "a");  // name order
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  const SafetensorsEntry* ea = (*file)->Find("a");
  ASSERT_NE(ea, nullptr);
  auto ta = (*file)->ReadF32(*ea);
  ASSERT_OK(ta);
  EXPECT_TRUE(ta->is_view());  // aligned F32 is used in place
  EXPECT_EQ(ta->shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(ta->data(), ta->data() + 6),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto tb = (*file)->ReadF32(*(*file)->Find("b"));
  ASSERT_OK(tb);
  EXPECT_EQ(tb->data()[0], -7.5f);
  EXPECT_EQ((*file)->Find("missing"), nullptr);
  // Deterministic bytes.
  auto bytes = SerializeSafetensors({{"a", &a}, {"b", &b}, {"e", &empty}},
                                    {{"format", "pt"}});
  ASSERT_OK(bytes);
  EXPECT_EQ(*bytes, testing::ReadFileOrEmpty(path));
  EXPECT_FALSE(WriteSafetensors(path, {{"a", &a}, {"a", &b}}).ok());
}

// The mapping is registered as immutable host memory while the file is
// open (a device kernel backend uploads its tensors once) and forgotten
// before it is unmapped.
TEST(SafetensorsTest, MappingIsAnImmutableRegionWhileOpen) {
  testing::TempDir dir;
  Tensor a = Tensor::FromVector({4}, {1, 2, 3, 4});
  const std::string path = dir.Sub("w.safetensors");
  ASSERT_OK(WriteSafetensors(path, {{"a", &a}}, {}));
  auto file = SafetensorsFile::Open(path);
  ASSERT_OK(file);
  auto ta = (*file)->ReadF32(*(*file)->Find("a"));
  ASSERT_OK(ta);
  ASSERT_TRUE(ta->is_view());
  std::optional<kernels::ImmutableHostRegion> region =
      kernels::FindImmutableHostRegion(ta->data(), 4 * sizeof(float));
  ASSERT_TRUE(region.has_value());
  const uint64_t id = region->id;
  EXPECT_TRUE(kernels::ImmutableHostRegionLive(id));
  file->reset();
  EXPECT_FALSE(kernels::ImmutableHostRegionLive(id));
}

TEST(SafetensorsTest, ReadsBf16AndF16AsF32) {
  testing::TempDir dir;
  // bf16 [2]: 1.0, -2.0; f16 [1] at an odd offset: 0.5.
  const std::string header =
      R"({"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
      R"("y":{"dtype":"F16","shape":[1],"data_offsets":[5,7]}})";
  std::string file = RawFile(header, 0);
  const uint16_t x[2] = {0x3f80, 0xc000};
  file.append(reinterpret_cast<const char*>(x), 4);
  file.push_back('\0');
  const uint16_t y = 0x3800;
  file.append(reinterpret_cast<const char*>(&y), 2);
  testing::WriteFileOrFail(dir.Sub("h.safetensors"), file);
  auto f = SafetensorsFile::Open(dir.Sub("h.safetensors"));
  ASSERT_OK(f);
  auto tx = (*f)->ReadF32(*(*f)->Find("x"));
  ASSERT_OK(tx);
  EXPECT_FALSE(tx->is_view());
  EXPECT_EQ(tx->data()[0], 1.0f);
  EXPECT_EQ(tx->data()[1], -2.0f);
  auto ty = (*f)->ReadF32(*(*f)->Find("y"));
  ASSERT_OK(ty);
  EXPECT_EQ(ty->data()[0], 0.5f);
}

TEST(SafetensorsTest, NonFloatTensorsAreListedButNotConvertible) {
  const std::string file =
      RawFile(R"({"n":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16);
  auto h = ParseSafetensorsHeader(file, "f");
  ASSERT_OK(h);
  EXPECT_EQ(h->entries[0].dtype, std::nullopt);
}

TEST(SafetensorsTest, RejectsMalformedHeaders) {
  struct Case {
    std::string header;
    size_t data;
    std::string message;
  };
  const Case cases[] = {
      {"not json", 0, "not valid JSON"},
      {"[1, 2]", 0, "not a JSON object"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8,
       "tensor 't'"},  // shape says 8 bytes
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4,
       "outside the data section"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8,
       "outside"},
      {R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
       "negative"},
      {R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", 8,
       "non-integer"},
      {R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8,
       "unknown dtype"},
      {R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8, "dtype"},
      {R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8, "shape"},
      {R"({"t":{"dtype":"F32","shape":[2]}})", 8, "data_offsets"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8,
       "data_offsets"},
      {R"({"t":"x"})", 0, "not an object"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "overlaps"},
      {R"({"t":{"dtype":"F32","shape":[1099511627776,1099511627776],)"
       R"("data_offsets":[0,8]}})",
       8, "larger"},
      {R"({"__metadata__":{"k":1}})", 0, "not a string"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ParseStatus(RawFile(c.header, c.data));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.header;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.header;
    EXPECT_THAT(s.message(), HasSubstr("test.safetensors")) << c.header;
  }
  // Header length beyond the file, and files too short to hold it.
  std::string file = RawFile("{}", 0);
  file[0] = 100;
  EXPECT_EQ(ParseStatus(file).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStatus("abc").code(), absl::StatusCode::kInvalidArgument);
  std::string huge(8, '\xff');
  EXPECT_EQ(ParseStatus(huge).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, EveryTruncationOfAValidFileIsRejectedOrConsistent) {
  Tensor a = Tensor::FromVector({3}, {1, 2, 3});
  auto bytes = SerializeSafetensors({{"a", &a}});
  ASSERT_OK(bytes);
  for (size_t n = 0; n < bytes->size(); ++n) {
    EXPECT_FALSE(ParseStatus(bytes->substr(0, n)).ok()) << n;
  }
  EXPECT_OK(ParseStatus(*bytes));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  auto f = SafetensorsFile::Open("/nonexistent/x.safetensors");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("/nonexistent/x.safetensors"));
}

}  // namespace
}  // namespace twice::engine
