#include "health/cuda_compat.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(ParseCudaVersion, AcceptsMajorMinorAndPatch) {
  EXPECT_EQ(ParseCudaVersion("12.4"), (CudaVersion{12, 4}));
  EXPECT_EQ(ParseCudaVersion(" 11.8.0 "), (CudaVersion{11, 8}));
  EXPECT_FALSE(ParseCudaVersion("12"));
  EXPECT_FALSE(ParseCudaVersion("twelve.four"));
  EXPECT_FALSE(ParseCudaVersion("12.4.x"));
  EXPECT_EQ(CudaVersionFromInt(12040), (CudaVersion{12, 4}));
  EXPECT_EQ(CudaVersionFromInt(11080).ToString(), "11.8");
}

TEST(ParseDriverVersion, ComparesPartsAsNumbers) {
  auto a = ParseDriverVersion("535.129.03"), b = ParseDriverVersion("535.54.03"), c = ParseDriverVersion("535.129.3");
  ASSERT_TRUE(a && b && c);
  EXPECT_GT(*a, *b);
  EXPECT_EQ(*a, *c);
  EXPECT_EQ(a->text, "535.129.03");
  EXPECT_LT(*ParseDriverVersion("570.26"), *ParseDriverVersion("570.124.06"));
  EXPECT_FALSE(ParseDriverVersion(""));
  EXPECT_FALSE(ParseDriverVersion("550.x"));
}

TEST(CudaDriverTable, BuiltinTableCoversCurrentReleases) {
  const CudaDriverTable& table = CudaDriverTable::Builtin();
  EXPECT_GE(table.rows().size(), 20u);
  const CudaDriverRequirement* row = table.Find({12, 4});
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->min_driver.text, "550.54.14");
  EXPECT_EQ(row->minor_compat.text, "525.60.13");
  EXPECT_EQ(table.Find({12, 7}), nullptr);  // there is no CUDA 12.7
  for (const CudaDriverRequirement& r : table.rows()) EXPECT_LE(r.minor_compat, r.min_driver) << r.cuda.ToString();
}

TEST(CudaDriverTable, RejectsMalformedRows) {
  EXPECT_TRUE(CudaDriverTable::Parse("# comment\n12.4\t550.54.14\t525.60.13\n").ok());
  EXPECT_FALSE(CudaDriverTable::Parse("12.4 550.54.14 525.60.13\n").ok());
  EXPECT_FALSE(CudaDriverTable::Parse("12.4\t550.54.14\n").ok());
}

}  // namespace
}  // namespace gpudoctor
