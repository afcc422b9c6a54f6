#include "smi/smi_values.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/text.h"
#include "smi/smi_test_util.h"

namespace gpudoctor::smi {
namespace {

using ::testing::Optional;

TEST(ClassifyValueTest, TellsReadingsFromNotSupportedAndFailedMarkers) {
  for (const char* text : {"N/A", "[N/A]", "Not Supported", "[Not Supported]", "", "  ",
                           "Not available in WDDM driver model", "Requested functionality has been deprecated"}) {
    EXPECT_EQ(ClassifyValue(text), ValueKind::kNotSupported) << '"' << text << '"';
  }
  for (const char* text : {"ERR!", "[Unknown Error]", "[GPU is lost]", "[Insufficient Permissions]",
                           "[GPU requires reset]", "Unknown Error", "GPU is lost"}) {
    EXPECT_EQ(ClassifyValue(text), ValueKind::kFailed) << text;
  }
  for (const char* text : {"56 C", "0", "Enabled", "NVIDIA H100 80GB HBM3", "N/A/B"}) {
    EXPECT_EQ(ClassifyValue(text), ValueKind::kReading) << text;
  }
}

TEST(NumberFieldTest, StripsTheUnitsNvidiaSmiPrints) {
  EXPECT_EQ(NumberField<uint32_t>("56 C"), Field<uint32_t>::Value(56));
  EXPECT_EQ(NumberField<uint32_t>("33C"), Field<uint32_t>::Value(33));
  EXPECT_EQ(NumberField<uint32_t>("100 %"), Field<uint32_t>::Value(100));
  EXPECT_EQ(NumberField<uint32_t>("30%"), Field<uint32_t>::Value(30));
  EXPECT_EQ(NumberField<uint32_t>("1560 MHz"), Field<uint32_t>::Value(1560));
  EXPECT_EQ(NumberField<uint32_t>("16x"), Field<uint32_t>::Value(16));
  EXPECT_EQ(NumberField<uint64_t>("2560 bank(s)"), Field<uint64_t>::Value(2560));
  EXPECT_EQ(NumberField<double>("228.82 W"), Field<double>::Value(228.82));
  EXPECT_EQ(NumberField<double>("71W"), Field<double>::Value(71));
  EXPECT_EQ(NumberField<uint64_t>(" 18446744073709551615 "), Field<uint64_t>::Value(UINT64_MAX));
}

TEST(NumberFieldTest, KeepsMarkersAndRejectsWhatIsNotANumber) {
  EXPECT_EQ(NumberField<uint32_t>("N/A"), Field<uint32_t>::NotSupported());
  EXPECT_EQ(NumberField<uint32_t>("[Not Supported]"), Field<uint32_t>::NotSupported());
  EXPECT_EQ(NumberField<uint32_t>("ERR!"), Field<uint32_t>::Failed("ERR!"));
  EXPECT_EQ(NumberField<double>("[Unknown Error]"), Field<double>::Failed("[Unknown Error]"));
  EXPECT_EQ(NumberField<uint32_t>("hot"), Field<uint32_t>::Failed("unexpected value \"hot\""));
  EXPECT_TRUE(NumberField<uint32_t>("56 parsecs").failed());
  EXPECT_TRUE(NumberField<uint32_t>("-8 C").failed());  // T.Limit margins are not temperatures
  EXPECT_TRUE(NumberField<uint32_t>("4294967296").failed());
  EXPECT_TRUE(NumberField<uint32_t>("56.5 C").failed());
  EXPECT_TRUE(NumberField<double>("inf").failed());
  EXPECT_TRUE(NumberField<double>(".").failed());
}

TEST(MebibytesFieldTest, ConvertsToBytes) {
  EXPECT_EQ(MebibytesField("81559 MiB"), Field<uint64_t>::Value(81559ull << 20));
  EXPECT_EQ(MebibytesField("4MiB"), Field<uint64_t>::Value(4ull << 20));
  EXPECT_EQ(MebibytesField("12206"), Field<uint64_t>::Value(12206ull << 20));  // --format=csv,nounits
  EXPECT_EQ(MebibytesField("2 GiB"), Field<uint64_t>::Value(2ull << 30));
  EXPECT_EQ(MebibytesField("N/A"), Field<uint64_t>::NotSupported());
  EXPECT_EQ(MebibytesField("ERR!"), Field<uint64_t>::Failed("ERR!"));
  EXPECT_TRUE(MebibytesField("12 W").failed());
  EXPECT_TRUE(MebibytesField("99999999999999999 MiB").failed());  // would overflow
}

TEST(FlagFieldTest, ReadsEveryYesNoSpelling) {
  for (const char* yes : {"Yes", "Enabled", "On", "Active", "enabled"}) EXPECT_EQ(FlagField(yes), Field<bool>::Value(true));
  for (const char* no : {"No", "Disabled", "Off", "Not Active"}) EXPECT_EQ(FlagField(no), Field<bool>::Value(false));
  EXPECT_EQ(FlagField("[N/A]"), Field<bool>::NotSupported());
  EXPECT_EQ(FlagField("ERR!"), Field<bool>::Failed("ERR!"));
  EXPECT_TRUE(FlagField("Maybe").failed());
}

TEST(PciBusIdFieldTest, Canonicalises) {
  EXPECT_EQ(PciBusIdField("00000000:CC:00.0"), Field<std::string>::Value("0000:cc:00.0"));
  EXPECT_EQ(PciBusIdField("N/A"), Field<std::string>::NotSupported());
  EXPECT_TRUE(PciBusIdField("not-a-bus").failed());
}

TEST(HexMaskFieldTest, ReadsClockEventMasks) {
  EXPECT_EQ(HexMaskField("0x0000000000000004"), Field<uint64_t>::Value(4));
  EXPECT_EQ(HexMaskField("0x48"), Field<uint64_t>::Value(0x48));
  EXPECT_EQ(HexMaskField("[N/A]"), Field<uint64_t>::NotSupported());
  EXPECT_TRUE(HexMaskField("0x").failed());
  EXPECT_TRUE(HexMaskField("0xZZ").failed());
}

TEST(ParseCudaVersionTest, UsesNvmlEncoding) {
  EXPECT_THAT(ParseCudaVersion("12.4"), Optional(12040));
  EXPECT_THAT(ParseCudaVersion("11.3"), Optional(11030));
  EXPECT_THAT(ParseCudaVersion("10.1"), Optional(10010));
  EXPECT_EQ(ParseCudaVersion("N/A"), std::nullopt);
  EXPECT_EQ(ParseCudaVersion("12"), std::nullopt);
  EXPECT_EQ(ParseCudaVersion("12.4.1"), std::nullopt);
}

TEST(ParseSmiTimestampTest, ReadsHeaderAndCsvForms) {
  auto iso = [](std::string_view text) {
    auto time = ParseSmiTimestamp(text);
    return time ? FormatIsoUtc(*time) : std::string("none");
  };
  EXPECT_EQ(iso("Sat May  8 13:25:04 2021"), "2021-05-08T13:25:04.000Z");
  EXPECT_EQ(iso("Fri Oct 25 11:35:11 2024       "), "2024-10-25T11:35:11.000Z");
  EXPECT_EQ(iso("2024/03/12 10:15:42.123"), "2024-03-12T10:15:42.123Z");
  EXPECT_EQ(iso("2024/03/12 10:15:42.5"), "2024-03-12T10:15:42.500Z");
  EXPECT_EQ(iso("2024/03/12 10:15:42"), "2024-03-12T10:15:42.000Z");
  EXPECT_EQ(iso("Thu Feb 30 10:00:00 2023"), "none");  // no such day
  EXPECT_EQ(iso("Thu Foo 10 10:00:00 2023"), "none");
  EXPECT_EQ(iso("Thu Feb 10 25:00:00 2023"), "none");
  EXPECT_EQ(iso("yesterday"), "none");
  // Years a 64-bit count of nanoseconds cannot hold (found by fuzz_smi: 9999 overflowed).
  EXPECT_EQ(iso("9999/12/31 23:59:59"), "none");
  EXPECT_EQ(iso("Fri Dec 31 23:59:59 9999"), "none");
  EXPECT_EQ(iso("1000/01/01 00:00:00"), "none");
  EXPECT_EQ(iso("2200/12/31 23:59:59"), "2200-12-31T23:59:59.000Z");
}

}  // namespace
}  // namespace gpudoctor::smi
