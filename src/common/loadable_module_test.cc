#include "common/loadable_module.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(LoadableModule, IsLookedForBesideTheProgramThenInItsLibDirectory) {
  std::vector<std::string> paths = ModuleSearchPaths("libx.so");
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0], std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libx.so");
  EXPECT_EQ(paths[1], std::string(GPUDOCTOR_BINARY_DIR) + "/bin/../lib/gpudoctor/libx.so");
}

TEST(LoadableModule, AMissingModuleNamesEveryPlaceLookedIn) {
  Result<void*> entry = LoadModuleEntry("libgpudoctor_no_such_module.so", "entry");
  ASSERT_FALSE(entry);
  EXPECT_NE(entry.error().message.find("cannot load libgpudoctor_no_such_module.so"), std::string::npos);
  for (const std::string& path : ModuleSearchPaths("libgpudoctor_no_such_module.so")) {
    EXPECT_NE(entry.error().message.find(path + ": not there"), std::string::npos) << entry.error().message;
  }
}

TEST(LoadableModule, ASharedObjectWithoutTheEntryPointIsRefused) {
  // The fake NVML library is built beside the tests; it is no gpudoctor module.
  Result<void*> entry = LoadModuleEntry("libgpudoctor_fake_nvml.so", "gpudoctor_http_server_module");
  ASSERT_FALSE(entry);
  EXPECT_NE(entry.error().message.find("has no gpudoctor_http_server_module"), std::string::npos)
      << entry.error().message;
}

TEST(LoadableModule, TheModulesOfThisBuildLoad) {
  for (const auto& [file, entry] : {std::pair{"libgpudoctor_http_server.so", "gpudoctor_http_server_module"},
                                    std::pair{"libgpudoctor_http_client.so", "gpudoctor_http_client_module"}}) {
    Result<void*> loaded = LoadModuleEntry(file, entry);
    ASSERT_TRUE(loaded) << loaded.error().message;
    auto table = reinterpret_cast<const void* (*)(const char*)>(*loaded);
    EXPECT_NE(table(kModuleAbi), nullptr) << file;
    EXPECT_EQ(table("gpudoctor-modules-0"), nullptr) << file << " accepts another build's ABI";
  }
}

}  // namespace
}  // namespace gpudoctor
