#include "logs/catalog_codec.h"

#include <gtest/gtest.h>

#include <random>

namespace gpudoctor {

extern const char kBuiltinCatalogToml[];  // data/events.toml, embedded

namespace {

LogCatalog ParsedCatalog() {
  Result<LogCatalog> parsed = LogCatalog::FromToml(kBuiltinCatalogToml, "data/events.toml");
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().message);
  return parsed ? *parsed : LogCatalog();
}

TEST(CatalogCodec, TheBuiltInCatalogIsTheTomlAsParsed) {
  const LogCatalog parsed = ParsedCatalog();
  ASSERT_FALSE(parsed.patterns().empty());
  EXPECT_TRUE(LogCatalog::Builtin() == parsed);
}

TEST(CatalogCodec, DecodingGivesBackWhatWasEncoded) {
  const LogCatalog parsed = ParsedCatalog();
  Result<LogCatalog> decoded = CatalogCodec::Decode(CatalogCodec::Encode(parsed));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_TRUE(*decoded == parsed);
  EXPECT_EQ(decoded->xids().size(), parsed.xids().size());
  EXPECT_EQ(decoded->decode().nvlink5.size(), parsed.decode().nvlink5.size());
}

TEST(CatalogCodec, TruncatedOrDamagedBytesAreAnErrorNeverACrash) {
  const std::string bytes = CatalogCodec::Encode(ParsedCatalog());
  for (size_t length = 0; length < bytes.size(); length += 1 + length / 64) {
    EXPECT_FALSE(CatalogCodec::Decode(std::string_view(bytes).substr(0, length))) << length;
  }
  EXPECT_FALSE(CatalogCodec::Decode(bytes + "x"));
  EXPECT_FALSE(CatalogCodec::Decode("not a catalog"));
  std::mt19937 random(7);
  for (int round = 0; round < 300; ++round) {
    std::string damaged = bytes;
    for (int flips = 0; flips < 4; ++flips) {
      damaged[std::uniform_int_distribution<size_t>(20, damaged.size() - 1)(random)] ^=
          static_cast<char>(1 << std::uniform_int_distribution<int>(0, 7)(random));
    }
    (void)CatalogCodec::Decode(damaged);  // decodes or refuses; never reads out of bounds
  }
}

}  // namespace
}  // namespace gpudoctor
