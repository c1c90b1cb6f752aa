#include "core/text_format.h"

#include <gtest/gtest.h>

namespace optpipe {
namespace {

TEST(TextFormat, NumbersReadShortAndExact) {
  EXPECT_EQ(FormatNumber(51.3), "51.3");
  EXPECT_EQ(FormatNumber(2503.6249), "2503.62");
  EXPECT_EQ(FormatNumber(2503.6249, 10), "2503.6249");
  EXPECT_EQ(FormatFixed(12.50, 2), "12.5");
  EXPECT_EQ(FormatFixed(30.0, 3), "30");
  EXPECT_EQ(FormatFixed(-0.0001, 2), "0");
  EXPECT_EQ(FormatFixed(12.5, 2, true), "12.50");
  EXPECT_EQ(FormatFixed(-1.25, 1, true), "-1.2");  // printf rounds half to even here
  EXPECT_EQ(FormatFixed(123456789012345.0, 1), "123456789012345");
  EXPECT_EQ(FormatFixed(2e300, 4), "2e+300");
  EXPECT_EQ(FormatFixed(-3.5e20, 2, true), "-3.5e+20");
}

TEST(TextFormat, NiceStepsAreOneTwoFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(NiceStep(7.3), 10);
  EXPECT_DOUBLE_EQ(NiceStep(10), 10);
  EXPECT_DOUBLE_EQ(NiceStep(1.01), 2);
  EXPECT_DOUBLE_EQ(NiceStep(0.03), 0.05);
  EXPECT_DOUBLE_EQ(NiceStep(420), 500);
  EXPECT_EQ(DecimalsFor(0.05), 2);
  EXPECT_EQ(DecimalsFor(500), 0);
}

TEST(TextFormat, XmlEscapeCoversTheFiveEntities) {
  EXPECT_EQ(XmlEscape(R"(a<b & "c" > 'd')"), "a&lt;b &amp; &quot;c&quot; &gt; &apos;d&apos;");
}

}  // namespace
}  // namespace optpipe
