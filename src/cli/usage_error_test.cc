// DescribeUsageError on a command line shaped like gpudoctor's: global
// options that every command takes (fallthrough), commands, and commands of
// commands, some required (diag), some optional (fleet's views).
#include "cli/usage_error.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

class UsageError : public ::testing::Test {
 protected:
  void SetUp() override {
    app_.require_subcommand(1);
    app_.fallthrough();
    app_.add_option("--simulate", text_);
    app_.add_flag("--json", flag_);
    CLI::App* status = app_.add_subcommand("status", "");
    status->add_option("--from-smi", text_);
    app_.add_subcommand("slurm", "");
    CLI::App* diag = app_.add_subcommand("diag", "");
    diag->require_subcommand(1);
    for (const char* name : {"memtest", "burn", "pcie", "all"}) diag->add_subcommand(name, "")->add_option("--gpu", text_);
    CLI::App* fleet = app_.add_subcommand("fleet", "");
    fleet->add_option("--range", text_);
    fleet->add_subcommand("offenders", "");
    fleet->add_subcommand("gpu", "")->add_option("serial", text_)->required();
    app_.add_subcommand("explain", "")->add_option("topic", words_);
    app_.add_subcommand("__hidden", "")->group("");
    CLI::App* trace = app_.add_subcommand("trace-alloc", "");
    trace->add_option("--interval", text_);
    trace->add_option("command", words_)->required();
    trace->prefix_command();
  }

  // What DescribeUsageError says of `arguments`; "parsed" when they parse,
  // "CLI11" when it leaves the message to CLI11.
  std::string Describe(std::vector<std::string> arguments) {
    std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
    try {
      app_.parse(arguments);
    } catch (const CLI::ParseError& e) {
      return DescribeUsageError(app_, e).value_or("CLI11: " + std::string(e.what()));
    }
    return "parsed";
  }

  CLI::App app_{"test", "gpudoctor"};
  std::string text_;
  bool flag_ = false;
  std::vector<std::string> words_;
};

TEST_F(UsageError, AnUnknownCommandNamesTheNearest) {
  EXPECT_EQ(Describe({"stauts"}), "gpudoctor: unknown command 'stauts'. Did you mean 'status'?");
  EXPECT_EQ(Describe({"--json", "stat"}), "gpudoctor: unknown command 'stat'. Did you mean 'status'?");
}

TEST_F(UsageError, AnUnknownCommandOfACommandNamesTheNearestOfThatCommand) {
  EXPECT_EQ(Describe({"diag", "memtst"}), "gpudoctor diag: unknown command 'memtst'. Did you mean 'memtest'?");
  EXPECT_EQ(Describe({"diag", "memtst", "--gpu", "0"}),
            "gpudoctor diag: unknown command 'memtst'. Did you mean 'memtest'?");
  EXPECT_EQ(Describe({"fleet", "ofenders"}), "gpudoctor fleet: unknown command 'ofenders'. Did you mean 'offenders'?");
}

TEST_F(UsageError, WithNothingNearTheCommandsAreListed) {
  EXPECT_EQ(Describe({"frobnicate"}),
            "gpudoctor: unknown command 'frobnicate'. The commands: 'status', 'slurm', 'diag', 'fleet', 'explain' or "
            "'trace-alloc' (gpudoctor --help describes them).");
  EXPECT_EQ(Describe({"diag"}),
            "gpudoctor diag: a command is required: 'memtest', 'burn', 'pcie' or 'all' (gpudoctor diag --help "
            "describes them).");
  EXPECT_EQ(Describe({"diag", "--gpu", "0"}),
            "gpudoctor diag: a command is required: 'memtest', 'burn', 'pcie' or 'all' (gpudoctor diag --help "
            "describes them).")
      << "0 is --gpu's value, not a command";
  EXPECT_EQ(Describe({}),
            "gpudoctor: a command is required: 'status', 'slurm', 'diag', 'fleet', 'explain' or 'trace-alloc' "
            "(gpudoctor --help describes them).");
}

TEST_F(UsageError, AnUnknownOptionNamesTheNearestGlobalOrOwnOption) {
  EXPECT_EQ(Describe({"status", "--simlate", "x"}),
            "gpudoctor status: unknown option '--simlate'. Did you mean '--simulate'?");
  EXPECT_EQ(Describe({"--simlate=x", "status"}),
            "gpudoctor status: unknown option '--simlate'. Did you mean '--simulate'?");
  EXPECT_EQ(Describe({"status", "--from-sm", "x"}),
            "gpudoctor status: unknown option '--from-sm'. Did you mean '--from-smi'?");
  EXPECT_EQ(Describe({"fleet", "offenders", "--rnage", "1d"}),
            "gpudoctor fleet offenders: unknown option '--rnage'. Did you mean '--range'?");
  EXPECT_EQ(Describe({"diag", "burn", "--gpus", "1"}), "gpudoctor diag burn: unknown option '--gpus'. Did you mean '--gpu'?");
  EXPECT_EQ(Describe({"status", "--zzzzzz"}),
            "gpudoctor status: unknown option '--zzzzzz' (gpudoctor status --help lists the options).");
}

TEST_F(UsageError, AProgramsOwnOptionsGoAfterTheDoubleDash) {
  EXPECT_EQ(Describe({"trace-alloc", "--intervl", "1s", "--", "python"}),
            "gpudoctor trace-alloc: unknown option '--intervl'. Did you mean '--interval'?");
  EXPECT_EQ(Describe({"trace-alloc", "python", "--frobnicate"}),
            "gpudoctor trace-alloc: unknown option '--frobnicate' (the program's own options go after --: gpudoctor "
            "trace-alloc [OPTIONS] -- COMMAND [ITS OPTIONS]).");
  EXPECT_EQ(Describe({"trace-alloc", "--", "python", "--frobnicate"}), "parsed");
}

TEST_F(UsageError, CLI11KeepsTheMessagesItGetsRight) {
  EXPECT_EQ(Describe({"status", "extra"}), "CLI11: The following argument was not expected: extra");
  EXPECT_EQ(Describe({"fleet", "gpu"}), "CLI11: serial is required");
  EXPECT_EQ(Describe({"status", "--from-smi"}), "CLI11: --from-smi: 1 required TEXT missing");
  EXPECT_EQ(Describe({"explain", "temprature_high"}), "parsed") << "explain judges its own topics";
}

TEST_F(UsageError, HiddenCommandsAreNeverSuggested) {
  EXPECT_EQ(Describe({"__hiden"}).find("__hidden"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
