// The unit table: what each unit means, and what is not a unit.
#include "plan/Lang/Units.h"

#include <gtest/gtest.h>

using namespace plan::units;

TEST(Units, SizesAreDecimalOrBinary) {
  EXPECT_EQ(lookup("B")->factor, 1.0);
  EXPECT_EQ(lookup("KB")->factor, 1e3);
  EXPECT_EQ(lookup("GB")->factor, 1e9);
  EXPECT_EQ(lookup("KiB")->factor, 1024.0);
  EXPECT_EQ(lookup("GiB")->factor, 1073741824.0);
  EXPECT_EQ(lookup("TiB")->factor, 1099511627776.0);
  EXPECT_EQ(lookup("GiB")->dim, Dim::Bytes);
}

TEST(Units, RatesCarryPerSecond) {
  EXPECT_EQ(lookup("GB/s")->dim, Dim::BytesPerSecond);
  EXPECT_EQ(lookup("GB/s")->factor, 1e9);
  EXPECT_EQ(lookup("TB/s")->factor, 1e12);
  EXPECT_EQ(lookup("TFLOP/s")->dim, Dim::FlopsPerSecond);
  EXPECT_EQ(lookup("TFLOP/s")->factor, 1e12);
  EXPECT_EQ(lookup("PFLOP/s")->factor, 1e15);
}

TEST(Units, Durations) {
  EXPECT_EQ(lookup("ms")->dim, Dim::Seconds);
  EXPECT_DOUBLE_EQ(lookup("ms")->factor, 1e-3);
  EXPECT_DOUBLE_EQ(lookup("us")->factor, 1e-6);
}

TEST(Units, CaseMattersAndUnknownsAreRejected) {
  EXPECT_FALSE(lookup("gib"));
  EXPECT_FALSE(lookup("GIB"));
  EXPECT_FALSE(lookup("FLOP")); // a count, not a rate
  EXPECT_FALSE(lookup("GB/ms"));
  EXPECT_FALSE(lookup(""));
}
