#include "net/http_access.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

HttpRequest Request(std::string host, std::string authorization = "") {
  HttpRequest request{.method = "GET", .path = "/api/v1/findings"};
  if (!host.empty()) request.headers.emplace_back("Host", std::move(host));
  if (!authorization.empty()) request.headers.emplace_back("Authorization", std::move(authorization));
  return request;
}

TEST(HttpAccess, WithoutATokenALoopbackServerAnswersOnlyRequestsToLocalhost) {
  const HttpAccess access(std::nullopt, {"127.0.0.1", 9847});
  for (const char* host : {"127.0.0.1:9847", "localhost:9847", "localhost", "[::1]:9847", "127.1.2.3"})
    EXPECT_FALSE(access.Refusal(Request(host), false).has_value()) << host;
  // A page on another site reaching us through DNS rebinding names its own host.
  for (const char* host : {"attacker.example:9847", "gpu01:9847", "", "127.0.0.1.attacker.example", "[::1"}) {
    std::optional<HttpResponse> refused = access.Refusal(Request(host), false);
    ASSERT_TRUE(refused.has_value()) << host;
    EXPECT_EQ(refused->status, 403);
  }
  EXPECT_TRUE(access.Refusal(Request("evil.example"), /*public_path=*/true).has_value()) << "the page too";
}

TEST(HttpAccess, WithoutATokenAServerOpenedOnPurposeChecksNoHost) {
  const HttpAccess access(std::nullopt, {"0.0.0.0", 9847});
  EXPECT_FALSE(access.Refusal(Request("gpu01:9847"), false).has_value()) << "Prometheus scraping the agent";
}

TEST(HttpAccess, WithATokenEveryPrivatePathNeedsIt) {
  const HttpAccess access(std::string("s3cret"), {"0.0.0.0", 9848});
  std::optional<HttpResponse> refused = access.Refusal(Request("fleet.example"), false);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 401);
  EXPECT_FALSE(access.Refusal(Request("fleet.example", "Bearer s3cret"), false).has_value());
  EXPECT_FALSE(access.Refusal(Request("fleet.example", "bearer   s3cret"), false).has_value());
  EXPECT_TRUE(access.Refusal(Request("fleet.example", "Bearer s3cre"), false).has_value());
  EXPECT_TRUE(access.Refusal(Request("fleet.example", "Basic s3cret"), false).has_value());
  EXPECT_FALSE(access.Refusal(Request("fleet.example"), /*public_path=*/true).has_value());
}

TEST(IsLoopbackHost, KnowsLoopbackAddresses) {
  for (const char* yes : {"localhost", "LOCALHOST", "127.0.0.1", "127.255.0.9", "::1"})
    EXPECT_TRUE(IsLoopbackHost(yes)) << yes;
  for (const char* no : {"", "0.0.0.0", "10.0.0.1", "::", "localhost.example", "128.0.0.1"})
    EXPECT_FALSE(IsLoopbackHost(no)) << no;
}

}  // namespace
}  // namespace gpudoctor
