#include "net/http_message.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(HttpRequest, HeadersAreFoundInAnyCaseQueryParametersExactly) {
  const HttpRequest request{.method = "GET",
                            .path = "/api/v1/history",
                            .query = {{"gpu", "3"}, {"Gpu", "4"}, {"gpu", "5"}, {"flag", ""}},
                            .headers = {{"Accept-Encoding", "gzip"}, {"X-Twice", "first"}, {"x-twice", "second"}}};
  EXPECT_EQ(request.Header("accept-encoding"), "gzip");
  EXPECT_EQ(request.Header("X-TWICE"), "first");
  EXPECT_EQ(request.Header("Authorization"), std::nullopt);
  EXPECT_EQ(request.Query("gpu"), "3");
  EXPECT_EQ(request.Query("Gpu"), "4");
  EXPECT_EQ(request.Query("flag"), "");
  EXPECT_EQ(request.Query("metric"), std::nullopt);
}

TEST(HttpResponse, BodiesKeepTheirBytesAliveAndNameTheirType) {
  HttpResponse owned;
  owned.SetBody(std::string(1000, 'x'), "text/plain");
  EXPECT_EQ(owned.body.size(), 1000u);
  EXPECT_NE(owned.body_owner, nullptr);
  EXPECT_EQ(owned.headers, (HttpFields{{"Content-Type", "text/plain"}}));

  auto shared_text = std::make_shared<const std::string>("shared");
  HttpResponse shared;
  shared.SetSharedBody(shared_text, "text/plain");
  EXPECT_EQ(shared.body.data(), shared_text->data());  // not copied
  EXPECT_EQ(shared_text.use_count(), 2);

  static constexpr std::string_view kEmbedded = "<html></html>";
  HttpResponse embedded;
  embedded.SetStaticBody(kEmbedded, "text/html");
  EXPECT_EQ(embedded.body.data(), kEmbedded.data());
  EXPECT_EQ(embedded.body_owner, nullptr);
}

TEST(AcceptsGzip, FollowsCodingsAndQValues) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("GZIP"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br"));
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, gzip;q=0.8, *;q=0.1"));  // Prometheus
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip(" deflate ,  gzip ; q=0.001 "));
  EXPECT_TRUE(AcceptsGzip("gzip;Q=0.5"));

  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.000"));
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0, *"));  // named gzip wins over the wildcard
  EXPECT_FALSE(AcceptsGzip("gzip;q=abc"));   // a garbled preference is a refusal
  EXPECT_FALSE(AcceptsGzip("gzip;q=2"));
  EXPECT_FALSE(AcceptsGzip("gzipped"));
}

TEST(PercentDecode, DecodesEscapesAndPlusOnlyWhereAsked) {
  EXPECT_EQ(PercentDecode("/a%20b%2Fc"), "/a b/c");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("%41%4a%4A"), "AJJ");
  for (std::string_view bad : {"%", "%4", "%zz", "%+1", "%-1", "abc%4"}) {
    EXPECT_EQ(PercentDecode(bad), std::nullopt) << bad;
  }
}

TEST(DecodeTarget, SplitsThePathFromDecodedQueryPairs) {
  HttpRequest request;
  ASSERT_TRUE(DecodeTarget("/api/v1/history?gpu=3&metric=power_w%2Ctemperature_c&&flag&q=a+b&=x", request));
  EXPECT_EQ(request.path, "/api/v1/history");
  EXPECT_EQ(request.query,
            (HttpFields{{"gpu", "3"}, {"metric", "power_w,temperature_c"}, {"flag", ""}, {"q", "a b"}, {"", "x"}}));
  ASSERT_TRUE(DecodeTarget("/plain%2Fpath", request));
  EXPECT_EQ(request.path, "/plain/path");
  EXPECT_TRUE(request.query.empty());
  EXPECT_FALSE(DecodeTarget("/bad%zz", request));
  EXPECT_FALSE(DecodeTarget("/ok?x=%", request));
}

}  // namespace
}  // namespace gpudoctor
