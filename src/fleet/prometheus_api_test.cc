#include "fleet/prometheus_api.h"

#include <cmath>

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
}

TEST(PrometheusAnswer, MakeRefusesWhatIsNotAUrl) {
  EXPECT_FALSE(MakeHttpPrometheusApi("prometheus:9090", std::chrono::seconds(1)).ok());
  EXPECT_FALSE(MakeHttpPrometheusApi("ftp://x", std::chrono::seconds(1)).ok());
  EXPECT_TRUE(MakeHttpPrometheusApi("http://127.0.0.1:9090/prom/", std::chrono::seconds(1)).ok());
}

}  // namespace
}  // namespace gpudoctor
