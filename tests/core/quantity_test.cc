#include "core/quantity.h"

#include "gtest/gtest.h"

namespace gangsched {
namespace {

int64_t Milli(const char* text) {
  return ParseQuantity(text, QuantityScale::kMilli).value();
}
int64_t Bytes(const char* text) {
  return ParseQuantity(text, QuantityScale::kBytes).value();
}

TEST(QuantityTest, ParsesCpuAndGpuInMilliUnits) {
  EXPECT_EQ(Milli("500m"), 500);
  EXPECT_EQ(Milli("1"), 1000);
  EXPECT_EQ(Milli("0.5"), 500);
  EXPECT_EQ(Milli("2.25"), 2250);
  EXPECT_EQ(Milli("+3"), 3000);
  EXPECT_EQ(Milli("1k"), 1000000);
  EXPECT_EQ(Milli("1e2"), 100000);
  EXPECT_EQ(Milli("0"), 0);
  EXPECT_EQ(Milli("100u"), 1);  // a fraction of a milli-unit rounds up
  EXPECT_EQ(Milli("0.0001"), 1);
}

TEST(QuantityTest, RoundsUpOnceWhateverIsCutOff) {
  EXPECT_EQ(Milli("1.0005"), 1001);  // a remainder of the division
  // Past 18 decimals digits are dropped; a dropped non-zero digit rounds up,
  // and together with a remainder still by one unit.
  EXPECT_EQ(Milli("1.0000000000000000001"), 1001);
  EXPECT_EQ(Milli("1.0005000000000000001"), 1001);
  EXPECT_EQ(Milli("1.0000000000000000000"), 1000);
  EXPECT_EQ(Bytes("0.5Ki"), 512);  // binary suffixes stay exact
  EXPECT_EQ(Bytes("0.0001Ki"), 1);
  // Whole after scaling (no division), yet with a dropped digit.
  EXPECT_EQ(Bytes("1.0000000000000000001E"), 1000000000000000001);
  EXPECT_EQ(Milli("0.0000000000000000001e15"), 1);
}

TEST(QuantityTest, RejectsABinarySuffixPastTheRange) {
  // A 30-digit mantissa times 2^60 would not fit even 128 bits.
  EXPECT_FALSE(
      ParseQuantity("999999999999999999999999999999Ei", QuantityScale::kBytes)
          .ok());
  // 2^68 Ei is 2^128: shifted unchecked it wraps to 0 and would pass.
  EXPECT_FALSE(
      ParseQuantity("295147905179352825856Ei", QuantityScale::kBytes).ok());
}

TEST(QuantityTest, ParsesMemoryInBytes) {
  EXPECT_EQ(Bytes("16Gi"), int64_t{16} << 30);
  EXPECT_EQ(Bytes("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(Bytes("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(Bytes("2Ti"), int64_t{2} << 40);
  EXPECT_EQ(Bytes("1G"), 1000000000);
  EXPECT_EQ(Bytes("128974848"), 128974848);
  EXPECT_EQ(Bytes("129e6"), 129000000);
  EXPECT_EQ(Bytes("1m"), 1);  // a thousandth of a byte rounds up to one
}

TEST(QuantityTest, RejectsBadInput) {
  for (const char* bad :
       {"", "-1", "-0.5", "abc", "1.2.3", "5x", "Gi", ".", "1 Gi", "1e",
        "1e1000", "99999999999999999999999999999999999"}) {
    EXPECT_FALSE(ParseQuantity(bad, QuantityScale::kMilli).ok()) << bad;
    EXPECT_FALSE(ParseQuantity(bad, QuantityScale::kBytes).ok()) << bad;
  }
  EXPECT_FALSE(
      ParseQuantity("9223372036854775807", QuantityScale::kMilli).ok());
  EXPECT_FALSE(ParseQuantity("8Ei", QuantityScale::kBytes).ok());
  EXPECT_TRUE(ParseQuantity("7Ei", QuantityScale::kBytes).ok());
}

TEST(QuantityTest, ErrorMessageQuotesTheInput) {
  auto result = ParseQuantity("-2", QuantityScale::kMilli);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("\"-2\""), absl::string_view::npos);
  EXPECT_NE(result.status().message().find("negative"),
            absl::string_view::npos);
}

TEST(QuantityTest, ScaleFollowsTheResourceName) {
  EXPECT_EQ(ScaleFor("memory"), QuantityScale::kBytes);
  EXPECT_EQ(ScaleFor("ephemeral-storage"), QuantityScale::kBytes);
  EXPECT_EQ(ScaleFor("hugepages-2Mi"), QuantityScale::kBytes);
  EXPECT_EQ(ScaleFor("cpu"), QuantityScale::kMilli);
  EXPECT_EQ(ScaleFor("nvidia.com/gpu"), QuantityScale::kMilli);
  EXPECT_EQ(ScaleFor("example.com/foo"), QuantityScale::kMilli);
}

TEST(QuantityTest, FormatsWithTheSuffixKubernetesWouldChoose) {
  EXPECT_EQ(FormatQuantity(4000, QuantityScale::kMilli), "4");
  EXPECT_EQ(FormatQuantity(250, QuantityScale::kMilli), "250m");
  EXPECT_EQ(FormatQuantity(int64_t{16} << 30, QuantityScale::kBytes), "16Gi");
  EXPECT_EQ(FormatQuantity(int64_t{3} << 29, QuantityScale::kBytes), "1536Mi");
  EXPECT_EQ(FormatQuantity(1000, QuantityScale::kBytes), "1k");
  EXPECT_EQ(FormatQuantity(1023, QuantityScale::kBytes), "1023");
  EXPECT_EQ(FormatQuantity(1024, QuantityScale::kBytes), "1Ki");
  // A node of "840G" reads 840G, not 820312500Ki (both are exact).
  EXPECT_EQ(FormatQuantity(int64_t{840} * 1000000000, QuantityScale::kBytes),
            "840G");
  EXPECT_EQ(FormatQuantity(int64_t{2} * 1000000000, QuantityScale::kBytes),
            "2G");
  // A tie of digits keeps the binary form: 1000Ki, not 1024k.
  EXPECT_EQ(FormatQuantity(1024000, QuantityScale::kBytes), "1000Ki");
  EXPECT_EQ(FormatQuantity(int64_t{1500} << 20, QuantityScale::kBytes),
            "1500Mi");
  EXPECT_EQ(
      FormatQuantity(int64_t{3} * 1000000000000000000, QuantityScale::kBytes),
      "3E");
  EXPECT_EQ(FormatQuantity(int64_t{64000} * 1000, QuantityScale::kMilli),
            "64k");
  EXPECT_EQ(FormatQuantity(1500, QuantityScale::kMilli), "1500m");
  EXPECT_EQ(FormatQuantity(0, QuantityScale::kMilli), "0");
  EXPECT_EQ(FormatQuantity(0, QuantityScale::kBytes), "0");
  for (const char* text : {"500m", "3", "0.5", "1.5Gi", "7Ti", "840G", "1e3"}) {
    QuantityScale scale = text[0] == '1' || text[0] == '7'
                              ? QuantityScale::kBytes
                              : QuantityScale::kMilli;
    int64_t amount = ParseQuantity(text, scale).value();
    EXPECT_EQ(ParseQuantity(FormatQuantity(amount, scale), scale).value(),
              amount)
        << text;
  }
}

}  // namespace
}  // namespace gangsched
