#include "agent/metrics_cache.h"

#include <gtest/gtest.h>

#include "agent/agent_state.h"
#include "net/prometheus_text_parser.h"
#include "agent/testing/synthetic_agent.h"
#include "agent/testing/test_start.h"
#include "common/gzip_test_support.h"

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using agent_testing::kStart;

class MetricsCacheTest : public ::testing::Test {
 protected:
  MetricsCacheTest() {
    clock_.Set(kStart);
    Publish();
  }

  void Publish() { state_.PublishSnapshot(std::make_shared<const Snapshot>(SyntheticSnapshot(8, clock_.Now()))); }

  static std::optional<double> Sample(const MetricsCache::Body& body, const std::string& name) {
    Result<PromExposition> parsed = ParsePrometheusText(*body.bytes);
    EXPECT_TRUE(parsed.ok());
    return parsed.ok() ? parsed->Value(name) : std::nullopt;
  }

  FakeClock clock_;
  AgentState state_{kStart};
  AlertCounters alerts_;
  MetricsCache cache_{state_, [this] { return alerts_; }, {.stale_after = seconds(15)}, clock_};
};

TEST_F(MetricsCacheTest, OneRenderingServesEveryScrapeOfTheSameSecond) {
  MetricsCache::Body first = cache_.Get(false);
  clock_.Advance(milliseconds(900));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cache_.Get(false).bytes, first.bytes);
  EXPECT_EQ(cache_.renders(), 1u);
  EXPECT_EQ(Sample(first, "gpudoctor_up"), 1);
}

TEST_F(MetricsCacheTest, ANewStateRendersAgain) {
  MetricsCache::Body before = cache_.Get(false);
  Publish();  // same second, new generation
  MetricsCache::Body after = cache_.Get(false);
  EXPECT_NE(after.bytes, before.bytes);
  EXPECT_EQ(Sample(after, "gpudoctor_samples_total"), 2);
  EXPECT_EQ(cache_.renders(), 2u);
}

TEST_F(MetricsCacheTest, TheNextSecondRendersAgainSoAgeAndStalenessMove) {
  EXPECT_EQ(Sample(cache_.Get(false), "gpudoctor_sample_age_seconds"), 0);
  clock_.Set(kStart + seconds(16));
  MetricsCache::Body stale = cache_.Get(false);
  EXPECT_EQ(Sample(stale, "gpudoctor_sample_age_seconds"), 16);
  EXPECT_EQ(Sample(stale, "gpudoctor_up"), 0);
}

TEST_F(MetricsCacheTest, AlertCountersAreTracked) {
  alerts_.sinks = {{.name = "webhook", .delivered = 1}};
  cache_.Get(false);
  alerts_.sinks[0].delivered = 2;
  MetricsCache::Body body = cache_.Get(false);
  Result<PromExposition> parsed = ParsePrometheusText(*body.bytes);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->Value("gpudoctor_alerts_delivered_total", {{"sink", "webhook"}}), 2);
  EXPECT_EQ(cache_.renders(), 2u);
}

TEST_F(MetricsCacheTest, CompressesOncePerRenderingAndOnlyWhenAsked) {
  MetricsCache::Body plain = cache_.Get(false);
  EXPECT_FALSE(plain.gzip);
  EXPECT_EQ(cache_.compressions(), 0u);
  MetricsCache::Body packed = cache_.Get(true);
  EXPECT_TRUE(packed.gzip);
  EXPECT_LT(packed.bytes->size(), plain.bytes->size() / 5);
  EXPECT_EQ(Gunzip(*packed.bytes), *plain.bytes);
  EXPECT_EQ(cache_.Get(true).bytes, packed.bytes);
  EXPECT_EQ(cache_.compressions(), 1u);

  Publish();
  EXPECT_EQ(Gunzip(*cache_.Get(true).bytes), *cache_.Get(false).bytes);
  EXPECT_EQ(cache_.compressions(), 2u);
}

}  // namespace
}  // namespace gpudoctor
