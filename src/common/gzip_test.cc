#include "common/gzip.h"

#include <gtest/gtest.h>

#include "common/gzip_test_support.h"

namespace gpudoctor {
namespace {

TEST(Gzip, RoundTripsAtEveryLevel) {
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "gpudoctor_gpu_temperature_celsius{gpu=\"" + std::to_string(i % 8) + "\"} 71\n";
  for (GzipLevel level : {GzipLevel::kDefault, GzipLevel::kSmallest}) {
    Result<std::string> packed = Gzip(text, level);
    ASSERT_TRUE(packed.ok()) << packed.error().message;
    EXPECT_EQ(packed->substr(0, 2), "\x1f\x8b");  // the gzip magic number
    EXPECT_LT(packed->size(), text.size() / 20);
    EXPECT_EQ(Gunzip(*packed), text);
  }
  EXPECT_LE(Gzip(text, GzipLevel::kSmallest)->size(), Gzip(text)->size());
}

TEST(Gzip, EmptyInputIsAValidStream) {
  Result<std::string> packed = Gzip("");
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(Gunzip(*packed), "");
}

}  // namespace
}  // namespace gpudoctor
