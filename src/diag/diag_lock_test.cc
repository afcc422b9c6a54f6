#include "diag/diag_lock.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace gpudoctor {
namespace {

std::string ScratchDirectory() {
  std::string pattern = (std::filesystem::temp_directory_path() / "gpudoctor-diag-lock-XXXXXX").string();
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

TEST(DiagLock, ASecondRunOnTheSameGpuIsToldWhoHoldsIt) {
  const std::string directory = ScratchDirectory();
  DiagLockAttempt first = AcquireDiagLock(directory, "0000:3b:00.0");
  ASSERT_TRUE(first.lock.has_value()) << first.error;
  DiagLockAttempt second = AcquireDiagLock(directory, "0000:3b:00.0");
  EXPECT_FALSE(second.lock.has_value());
  ASSERT_TRUE(second.held_by.has_value());
  EXPECT_EQ(*second.held_by, getpid());
  DiagLockAttempt other_gpu = AcquireDiagLock(directory, "0000:3c:00.0");
  EXPECT_TRUE(other_gpu.lock.has_value()) << "another GPU is free";
  first.lock.reset();
  DiagLockAttempt after = AcquireDiagLock(directory, "0000:3b:00.0");
  EXPECT_TRUE(after.lock.has_value()) << "released with its holder";
  std::filesystem::remove_all(directory);
}

TEST(DiagLock, ADirectoryThatCannotHoldLocksIsAnErrorNotARefusal) {
  DiagLockAttempt attempt = AcquireDiagLock("/nonexistent/gpudoctor", "0000:3b:00.0");
  EXPECT_FALSE(attempt.lock.has_value());
  EXPECT_FALSE(attempt.held_by.has_value());
  EXPECT_NE(attempt.error.find("/nonexistent/gpudoctor/diag-0000-3b-00.0.lock"), std::string::npos) << attempt.error;
}

TEST(DiagLock, TheDirectoryCanBeChosen) {
  const std::string directory = ScratchDirectory() + "/run";
  setenv("GPUDOCTOR_RUN_DIR", directory.c_str(), 1);
  Result<std::string> chosen = DiagLockDirectory();
  unsetenv("GPUDOCTOR_RUN_DIR");
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  EXPECT_EQ(*chosen, directory);
  EXPECT_TRUE(std::filesystem::is_directory(directory));
}

}  // namespace
}  // namespace gpudoctor
