// Captures that end early: real nvidia-smi outputs cut at several points must
// say so (snapshot.incomplete_reasons), in every format where a cut shows,
// and whole captures and deliberate excerpts must not.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/input_file.h"
#include "common/text.h"
#include "smi/nvidia_smi.h"

namespace gpudoctor {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Capture(const std::string& relative_path) {
  auto text = ReadInputFile(std::string(GPUDOCTOR_SOURCE_DIR) + "/" + relative_path, 1 << 20);
  EXPECT_TRUE(text.ok()) << text.error().message;
  return text ? *text : "";
}

std::vector<std::string> ReasonsOf(std::string_view text) {
  Result<Snapshot> snapshot = ParseNvidiaSmi(text, "cut");
  if (!snapshot) {
    ADD_FAILURE() << snapshot.error().message;
    return {};
  }
  return snapshot->incomplete_reasons;
}

// Cut points spread over [from, to): each cut keeps the first `cut` bytes.
std::vector<size_t> CutsBetween(size_t from, size_t to, size_t count = 6) {
  std::vector<size_t> cuts;
  for (size_t i = 0; i < count; ++i) cuts.push_back(from + (to - from) * (2 * i + 1) / (2 * count));
  return cuts;
}

TEST(IncompleteCapture, WholeCapturesAndExcerptsAreNotIncomplete) {
  for (const char* file :
       {"testdata/nvidia_smi/h100_x2_q.xml", "testdata/nvidia_smi/p100_418_q.xml", "testdata/nvidia_smi/a100_525_q.txt",
        "testdata/nvidia_smi/csv_a100_units.txt", "testdata/nvidia_smi/table_h100_x4_processes.txt",
        "testdata/nvidia_smi/table_p100_418.txt", "testdata/nvidia_smi/009.txt", "testdata/nvidia_smi/011.txt",
        "testdata/nvidia_smi/012.txt", "testdata/nvidia_smi/014.txt", "testdata/nvidia_smi/015.txt",
        "testdata/nvidia_smi/018.txt"}) {
    EXPECT_THAT(ReasonsOf(Capture(file)), IsEmpty()) << file;
  }
}

TEST(IncompleteCapture, XmlCutAnywhereAfterItsRootElement) {
  for (const char* file : {"testdata/nvidia_smi/h100_x2_q.xml", "testdata/nvidia_smi/p100_418_q.xml"}) {
    const std::string whole = Capture(file);
    const size_t root = whole.find("<nvidia_smi_log>") + std::string_view("<nvidia_smi_log>").size();
    for (size_t cut : CutsBetween(root, whole.size())) {
      std::vector<std::string> reasons = ReasonsOf(std::string_view(whole).substr(0, cut));
      EXPECT_THAT(reasons, Contains(HasSubstr("the XML is cut short or damaged"))) << file << " cut at " << cut;
    }
    // The last bytes too: the closing tag of the root element.
    EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, whole.rfind("</nvidia_smi_log>") + 5)), Not(IsEmpty()))
        << file;
  }
}

TEST(IncompleteCapture, XmlCutBeforeItsSecondGpuNamesBothReasons) {
  const std::string whole = Capture("testdata/nvidia_smi/h100_x2_q.xml");
  EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, 3000)),
              ElementsAre(HasSubstr("the XML is cut short or damaged: Start-end tags mismatch at byte"),
                          "it names 2 attached GPUs but describes 1"));
}

// Drivers from 570 on print a Capabilities section after Processes.
std::string WithCapabilitiesLast(std::string report) {
  return report + "    Capabilities\n        EGM                                            : disabled\n\n";
}

TEST(IncompleteCapture, QueryTextCutInsideItsGpu) {
  const std::string a100 = Capture("testdata/nvidia_smi/a100_525_q.txt");
  for (const std::string& whole : {a100, WithCapabilitiesLast(a100)}) {
    EXPECT_THAT(ReasonsOf(whole), IsEmpty());
    const size_t gpu = whole.find("\nGPU 0000");
    const size_t processes = whole.find("\n    Processes");
    ASSERT_NE(gpu, std::string::npos);
    ASSERT_NE(processes, std::string::npos);
    for (size_t cut : CutsBetween(gpu + 30, processes)) {
      EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, cut)),
                  ElementsAre("the report of its last GPU ends before its Processes section"))
          << "cut at " << cut;
    }
    // Cut before its GPU block: the report names a GPU it never describes.
    EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, gpu)),
                ElementsAre("it names 1 attached GPUs but describes 0"));
  }
}

TEST(IncompleteCapture, QueryTextWithFewerGpusThanAttached) {
  // Two GPUs attached; the second's block was cut off whole, or taken with -i.
  std::string text = Capture("testdata/nvidia_smi/a100_525_q.txt");
  const size_t attached = text.find("Attached GPUs");
  text.replace(text.find(": 1", attached), 3, ": 2");
  EXPECT_THAT(ReasonsOf(text), ElementsAre("it names 2 attached GPUs but describes 1"));

  // Both blocks there: whole.
  const size_t gpu = text.find("GPU 00000000:07:00.0");
  std::string second = text.substr(gpu);
  second.replace(0, std::string_view("GPU 00000000:07:00.0").size(), "GPU 00000000:0F:00.0");
  EXPECT_THAT(ReasonsOf(text + second), IsEmpty());
  // The second block cut: its shape differs from a whole one.
  EXPECT_THAT(ReasonsOf(text + second.substr(0, second.size() / 2)),
              ElementsAre("the report of its last GPU ends before its Processes section"));
}

TEST(IncompleteCapture, CsvCutInsideItsLastRow) {
  const std::string whole = Capture("testdata/nvidia_smi/csv_a100_units.txt");
  const size_t last_row = whole.rfind("2023/03/01");
  for (size_t cut : CutsBetween(last_row + 30, whole.size() - 20, 4)) {
    EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, cut)),
                ElementsAre(::testing::MatchesRegex("the last CSV row has [0-9]+ of 40 columns")))
        << "cut at " << cut;
  }
  // Cut between the rows: the count column names two GPUs, one is there.
  EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, last_row)),
              ElementsAre("it names 2 attached GPUs but describes 1"));
}

TEST(IncompleteCapture, TableCutInsideABox) {
  const std::string whole = Capture("testdata/nvidia_smi/table_h100_x4_processes.txt");
  const size_t first_gpu_row = whole.find("|   0  NVIDIA");
  size_t inside_a_box = 0;
  for (size_t cut : CutsBetween(first_gpu_row, whole.size() - 2, 8)) {
    // A cut just after a whole border line looks like an excerpt of whole blocks.
    const std::string_view kept = Trim(std::string_view(whole).substr(0, cut));
    const std::string_view last_line = kept.substr(kept.rfind('\n') + 1);
    if (last_line.starts_with('+') && last_line.ends_with('+')) continue;
    ++inside_a_box;
    EXPECT_THAT(ReasonsOf(std::string_view(whole).substr(0, cut)),
                Contains("the table ends inside a box, before its closing border line"))
        << "cut at " << cut;
  }
  EXPECT_GT(inside_a_box, 4u);
}

// One '|' lost from a GPU's first row, as a paste can do: the GPU stays, its
// readings from the damaged row are failed rather than absent, the capture
// says which row could not be read, and the rows that still read are kept.
TEST(DamagedCapture, ATableRowThatDoesNotReadKeepsItsGpuAndSaysSo) {
  std::string text = Capture("testdata/nvidia_smi/table_h100_x4_processes.txt");
  const std::string row = "|   1  NVIDIA H100 80GB HBM3          On  |";
  const size_t at = text.find(row);
  ASSERT_NE(at, std::string::npos);
  text.replace(at + row.size() - 1, 1, " ");
  Result<Snapshot> snapshot = ParseNvidiaSmi(text, "damaged");
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  ASSERT_EQ(snapshot->gpus.size(), 4u);
  const GpuSnapshot& gpu = snapshot->gpus[1];
  EXPECT_EQ(gpu.index, 1u);
  EXPECT_TRUE(gpu.ecc_volatile_uncorrected.failed()) << "its uncorrectable ECC count is unknown, not zero";
  EXPECT_EQ(gpu.temperature_c.value_or(0), 87u) << "its second row still reads";
  EXPECT_THAT(snapshot->incomplete_reasons, ElementsAre(HasSubstr("the row of GPU 1 is damaged")));
}

TEST(DamagedCapture, ASecondRowThatDoesNotReadFailsItsReadings) {
  std::string text = Capture("testdata/nvidia_smi/table_h100_x4_processes.txt");
  const std::string row = "| N/A   87C    P0            301W /  700W |";
  const size_t at = text.find(row);
  ASSERT_NE(at, std::string::npos);
  text.replace(at + 10, 6, "#####!");
  Result<Snapshot> snapshot = ParseNvidiaSmi(text, "damaged");
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  ASSERT_EQ(snapshot->gpus.size(), 4u);
  EXPECT_TRUE(snapshot->gpus[1].temperature_c.failed());
  EXPECT_EQ(snapshot->gpus[1].ecc_volatile_uncorrected.value_or(0), 1u);
  EXPECT_THAT(snapshot->incomplete_reasons, ElementsAre(HasSubstr("the second row of GPU 1 is damaged")));
}

}  // namespace
}  // namespace gpudoctor
