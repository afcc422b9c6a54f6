#include "fleet/prometheus_api.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(PrometheusAnswer, ReadsAVector) {
  auto series = ParsePrometheusAnswer(R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"__name__":"up","instance":"a:9847","job":"gpudoctor"},"value":[1700000000.5,"1"]},
      {"metric":{"instance":"b:9847"},"value":[1700000000.5,"NaN"]}]}})");
  ASSERT_TRUE(series.ok()) << series.error().message;
  ASSERT_EQ(series->size(), 2u);
  EXPECT_EQ((*series)[0].Label("instance"), "a:9847");
  EXPECT_EQ((*series)[0].Label("missing"), "");
  EXPECT_EQ((*series)[0].points[0].value, 1);
  EXPECT_TRUE(std::isnan((*series)[1].points[0].value));
}

TEST(PrometheusAnswer, ReadsAMatrixAndAScalar) {
  auto matrix = ParsePrometheusAnswer(R"({"status":"success","data":{"resultType":"matrix","result":[
      {"metric":{"gpu":"0"},"values":[[10,"1"],[25,"+Inf"]]}]}})");
  ASSERT_TRUE(matrix.ok()) << matrix.error().message;
  ASSERT_EQ((*matrix)[0].points.size(), 2u);
  EXPECT_TRUE(std::isinf((*matrix)[0].points[1].value));
  auto scalar = ParsePrometheusAnswer(R"({"status":"success","data":{"resultType":"scalar","result":[10,"4"]}})");
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ((*scalar)[0].points[0].value, 4);
}

TEST(PrometheusAnswer, ErrorsNameWhatWentWrong) {
  auto bad_query = ParsePrometheusAnswer(R"({"status":"error","errorType":"bad_data","error":"parse error"})");
  ASSERT_FALSE(bad_query.ok());
  EXPECT_EQ(bad_query.error().message, "bad_data: parse error");
  auto no_status = ParsePrometheusAnswer(R"({"status":{"resultType":"vector"}})");
  ASSERT_FALSE(no_status.ok());
  EXPECT_EQ(no_status.error().message, "the answer's status is not \"success\" and it names no error");
  for (const char* body : {"", "<html>", "[]", R"({"status":"success"})",
                           R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}})",
                           R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"x"]}]}})",
                           R"({"status":"success","data":{"resultType":"streams","result":[]}})",
                           // Fields of the wrong type are refused, not thrown over.
                           R"({"status":{"resultType":"vector"}})", R"({"status":"error","error":[1]})",
                           R"({"status":"success","data":{"resultType":7,"result":[]}})"}) {
    EXPECT_FALSE(ParsePrometheusAnswer(body).ok()) << body;
  }
}

TEST(PrometheusAnswer, ASampleTimeFarOutOfRangeIsClamped) {
  auto series = ParsePrometheusAnswer(
      R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1e300,"1"]}]}})");
  ASSERT_TRUE(series.ok()) << series.error().message;
  EXPECT_EQ((*series)[0].points[0].value, 1);
  // To what nanosecond ticks hold (1e11 s, the clamp before, was 1e20 ns: past them, found by fuzz_fleet).
  EXPECT_EQ((*series)[0].points[0].time.time_since_epoch(), std::chrono::seconds(8'900'000'000));
}

// The answer is read without building a document: 60 MB of '[' once took
// 4.7 GB. Nesting is refused at once, whatever follows.
TEST(PrometheusAnswer, DeepNestingIsRefusedAtOnce) {
  const std::string brackets(8 << 20, '[');
  auto series = ParsePrometheusAnswer(brackets);
  ASSERT_FALSE(series.ok());
  EXPECT_EQ(series.error().message, "the answer nests deeper than 32 levels");
  auto inside = ParsePrometheusAnswer(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"x":)" +
                                      std::string(1000, '[') + "}]}}");
  ASSERT_FALSE(inside.ok());
  EXPECT_EQ(inside.error().message, "the answer nests deeper than 32 levels");
}

TEST(PrometheusAnswer, WhatIsKeptIsBounded) {
  std::string body = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (int i = 0; i < 20000; ++i) {
    if (i > 0) body += ",";
    body += R"({"metric":{"instance":"host-)" + std::to_string(i) + R"(:9847"},"value":[1,"1"]})";
  }
  body += "]}}";
  ASSERT_TRUE(ParsePrometheusAnswer(body).ok());
  auto refused = ParsePrometheusAnswer(body, /*max_kept_bytes=*/1 << 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("more than the 1 MiB one answer may keep"), std::string::npos)
      << refused.error().message;
}

TEST(PrometheusAnswer, KeysMayComeInAnyOrderAndUnknownOnesAreSkipped) {
  auto series = ParsePrometheusAnswer(R"({"warnings":["w",{"deep":[[1]]}],"data":{"result":[
      {"values":[[5,"2"]],"extra":{"a":[1,2]},"metric":{"gpu":"1","n":3}}],"resultType":"matrix"},"status":"success"})");
  ASSERT_TRUE(series.ok()) << series.error().message;
  ASSERT_EQ(series->size(), 1u);
  EXPECT_EQ((*series)[0].Label("gpu"), "1");
  EXPECT_EQ((*series)[0].Label("n"), "") << "only string labels";
  ASSERT_EQ((*series)[0].points.size(), 1u);
  EXPECT_EQ((*series)[0].points[0].value, 2);
  for (const char* body : {R"({"status":"success","data":{"resultType":"matrix","result":[{"value":[1,"1"]}]}})",
                           R"({"status":"success","data":{"resultType":"vector","result":[[1,"1"]]}})",
                           R"({"status":"success","data":{"resultType":"vector","result":{"a":1}}})",
                           R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1",2]}]}})",
                           R"({"status":"success","data":{"resultType":"matrix","result":[{"values":[1]}]}})",
                           R"({"status":"success","data":{"resultType":"scalar","result":[{"value":[1,"1"]}]}})",
                           R"({"status":"success","data":{"resultType":"vector","result":[]}} trailing)"}) {
    EXPECT_FALSE(ParsePrometheusAnswer(body).ok()) << body;
  }
}

TEST(PrometheusAnswer, MakeRefusesWhatIsNotAUrl) {
  EXPECT_FALSE(MakeHttpPrometheusApi("prometheus:9090", std::chrono::seconds(1)).ok());
  EXPECT_FALSE(MakeHttpPrometheusApi("ftp://x", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(MakeHttpPrometheusApi("http://127.0.0.1:9090/prom/", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(MakeHttpPrometheusApi("http://ops:pw@127.0.0.1:9090", std::chrono::seconds(1)).ok());
  auto with_query = MakeHttpPrometheusApi("http://ops:hunter2@127.0.0.1:9090/?x=1", std::chrono::seconds(1));
  ASSERT_FALSE(with_query.ok());
  EXPECT_EQ(with_query.error().message.find("hunter2"), std::string::npos) << with_query.error().message;
}

}  // namespace
}  // namespace gpudoctor
