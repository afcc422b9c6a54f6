#include "logs/driver_classifier.h"

#include <gtest/gtest.h>

#include "logs/log_parser.h"
#include "logs/log_reader.h"

namespace gpudoctor {
namespace {

const DriverClassifier& Driver() { return LineMatcher::Builtin()->driver(); }

TEST(DriverClassifier, SplitsTheRmPrefix) {
  auto line = SplitDriverLine("NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out", {});
  ASSERT_TRUE(line);
  EXPECT_EQ(line->gpu_instance, "GPU6");
  EXPECT_EQ(line->function, "_kgspIsHeartbeatTimedOut");
  EXPECT_EQ(line->text, "Heartbeat timed out");

  line = SplitDriverLine("NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x24:0x72:1568)", {});
  ASSERT_TRUE(line);
  EXPECT_EQ(line->pci, "0000:3b:00.0");
  EXPECT_EQ(line->function, "");
  EXPECT_EQ(line->text, "RmInitAdapter failed! (0x24:0x72:1568)");

  EXPECT_EQ(SplitDriverLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15", {})->function, "");
  EXPECT_FALSE(SplitDriverLine("pcieport 0000:00:01.0: AER: Corrected error received", {}));
}

TEST(DriverClassifier, LongestFunctionPrefixWins) {
  EXPECT_EQ(Driver().SubsystemOfFunction("knvlinkDiscoverPostRxDetLinks_GH100")->name, "nvlink");
  EXPECT_EQ(Driver().SubsystemOfFunction("_kgspRpcGspEventPmuHalted")->name, "gsp");
  // "subdevice" is the GPU object; its NVLink controls belong to NVLink.
  EXPECT_EQ(Driver().SubsystemOfFunction("subdeviceCtrlCmdNvlinkSetPowerState_IMPL")->name, "nvlink");
  EXPECT_EQ(Driver().SubsystemOfFunction("subdeviceCtrlCmdGpuGetPartitions_IMPL")->name, "gpu");
  EXPECT_EQ(Driver().SubsystemOfFunction("ceutilsMemcopy")->name, "memory");
  EXPECT_EQ(Driver().SubsystemOfFunction("kceStateLoad_IMPL")->name, "engine");
  EXPECT_EQ(Driver().SubsystemOfFunction("zzNoSuchFunction"), nullptr);
  EXPECT_EQ(Driver().SubsystemOfFolder("src/nvidia/src/kernel/gpu/nvlink/kernel_nvlink.c")->name, "nvlink");
}

TEST(DriverClassifier, FunctionTaggedRmLinesAreErrorsOfTheirSubsystem) {
  auto verdict = Driver().Classify("NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!");
  EXPECT_EQ(verdict.verdict, DriverVerdict::kError);
  EXPECT_EQ(verdict.subsystem->kind, "nvlink_error");
  // A listed function needs no error word: a release driver prints these only as errors.
  verdict = Driver().Classify("NVRM: GPU0 kbusInitBar2_GM107: BAR2 state");
  EXPECT_EQ(verdict.verdict, DriverVerdict::kError);
  EXPECT_EQ(verdict.subsystem->name, "pcie");
}

TEST(DriverClassifier, HealthyBootLinesAreNoErrors) {
  for (const char* line : {
           "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
           "NVRM: GPU at PCI:0000:05:00: GPU-97363126-e553-8dd4-9ad8-56844b42694a",
           "NVRM: GPU Board Serial Number: 0325015054694",
           "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  550.54.15",
           "nvidia-uvm: Loaded the UVM driver, major device number 510.",
           "nvidia-nvlink: Nvlink Core is being initialized, major device number 511",
           "[drm] [nvidia-drm] [GPU ID 0x00000500] Loading driver",
           "[drm] Initialized nvidia-drm 0.0.0 20160202 for 0000:05:00.0 on minor 1",
           "NVRM: Persistence mode is deprecated and will be removed in a future release. Please use nvidia-persistenced "
           "instead.",
           "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
       }) {
    const DriverVerdict verdict = Driver().Classify(line).verdict;
    EXPECT_TRUE(verdict == DriverVerdict::kNotError || verdict == DriverVerdict::kBenign ||
                verdict == DriverVerdict::kNotDriver)
        << line;
  }
}

TEST(DriverClassifier, ModuleTagsCountOnlyWhereTheModuleSpeaks) {
  auto verdict = Driver().Classify("[drm:nv_drm_atomic_commit [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000100] "
                                   "Flip event timeout on head 0");
  EXPECT_EQ(verdict.verdict, DriverVerdict::kError);
  EXPECT_EQ(verdict.subsystem->kind, "display_error");
  EXPECT_EQ(verdict.line.module, "nvidia-drm");
  verdict = Driver().Classify("nvidia-nvlink: Failed to initialize driver : -12");
  EXPECT_EQ(verdict.verdict, DriverVerdict::kError);
  EXPECT_EQ(verdict.subsystem->kind, "nvlink_error");
  EXPECT_EQ(verdict.line.module, "nvidia-nvlink");
  // Text that merely names a module is not the module's message.
  EXPECT_EQ(Driver().Classify("rmmod: ERROR: could not remove nvidia-uvm: resource busy").verdict,
            DriverVerdict::kNotDriver);
}

TEST(DriverClassifier, ParserMakesOneEventPerUnnamedDriverError) {
  auto events = ParseText(
      "[ 10.0] NVRM: GPU6 kgmmuCheckMemSubsysError_IMPL: Memory Subsystem Error detected.\n"
      "[ 10.1] NVRM: GPU6 someUnknownHelper: something happened\n"
      "[ 10.2] NVRM: GPU6 someUnknownHelper: it failed\n"
      "[ 10.3] NVRM:     continued dump text that failed\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "memory_error");
  EXPECT_EQ(events[0].Field("subsystem"), "memory");
  EXPECT_EQ(events[0].Field("function"), "kgmmuCheckMemSubsysError_IMPL");
  EXPECT_EQ(events[0].Field("gpu_instance"), "GPU6");
  EXPECT_EQ(events[1].kind, "driver_error");
  EXPECT_EQ(events[1].Field("subsystem"), "unknown");
  EXPECT_EQ(events[1].severity, EventSeverity::kWarning);
}

TEST(DriverClassifier, FastReaderHandsOverModuleErrorsOnly) {
  LogScanner scanner(ReadOptions{});
  std::vector<LogEvent> events;
  auto sink = [&](LogEvent&& event) { events.push_back(std::move(event)); };
  scanner.Consume(
      "[ 1.0] nvidia-nvswitch0: open (major=511)\n"
      "[ 1.1] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
      "[ 1.2] [drm:nv_drm_atomic_commit [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000100] Flip event timeout\n"
      "[ 1.3] nvidia-uvm: uvm_channel.c:1734 uvm_channel_update_progress_with_max[pid:42] Assert failed\n",
      sink);
  scanner.Finish(sink);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "display_error");
  EXPECT_EQ(events[1].kind, "uvm_error");
  EXPECT_EQ(events[1].Field("module"), "nvidia-uvm");
  // The switch's open notice is no module line the classifier takes: the prefilter never hands it over.
  EXPECT_EQ(scanner.stats().parsed_lines, 2u);
}

// Found by fuzz_logs: "NVRM:" glued to a byte other than a blank is still a
// driver line for the classifier, so the prefilter must hand it over too, or
// the fast reader and the full parse disagree.
TEST(DriverClassifier, FastReaderAndFullParseAgreeOnAGluedTag) {
  const std::string text =
      "[224705.332316] NVRM:\xc5 Xid (PCI:0003:00:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error\n";
  std::vector<size_t> counts;
  for (bool prefilter : {true, false}) {
    ReadOptions options;
    options.prefilter = prefilter;
    LogScanner scanner(options);
    size_t events = 0;
    auto sink = [&](LogEvent&&) { ++events; };
    scanner.Consume(text, sink);
    scanner.Finish(sink);
    counts.push_back(events);
  }
  EXPECT_EQ(counts[0], counts[1]);
  EXPECT_EQ(counts[0], 1u);
}

// Found by fuzz_logs: a module's name that opens a message but is followed by neither ':' nor a bracket
// ("nvidia-peermem nv_mem_get_pages:412 ERROR ...", or a NVSwitch's numbered tag) must reach the classifier
// in both readers or in neither, wherever the line lies (inside an open event's window or not).
TEST(DriverClassifier, FastReaderAndFullParseAgreeOnModuleTags) {
  const std::string persistenced =
      "2025-08-16T00:03:04.126245-04:00 localhost systemd[1]: nvidia-persistenced.service: Control process exited, "
      "code=exited, status=1/FAILURE\n";
  for (const std::string& line :
       {std::string("2025-08-16T00:03:04.2-04:00 host kernel: nvidia-peermem nv_mem_get_pages:412 ERROR not mapped\n"),
        std::string("2025-08-16T00:03:04.2-04:00 host kernel: nvidia-drm and nvidia-uvm failing\n"),
        std::string("2025-08-16T00:03:04.2-04:00 host kernel: nvidia-nvswitch3: nvswitch_init failed\n")}) {
    for (const std::string& text : {line, persistenced + line}) {
      std::vector<std::vector<std::string>> kinds;
      for (bool prefilter : {true, false}) {
        ReadOptions options;
        options.prefilter = prefilter;
        LogScanner scanner(options);
        std::vector<std::string> seen;
        auto sink = [&](LogEvent&& event) { seen.push_back(event.kind); };
        scanner.Consume(text, sink);
        scanner.Finish(sink);
        kinds.push_back(seen);
      }
      EXPECT_EQ(kinds[0], kinds[1]) << text;
    }
  }
}

}  // namespace
}  // namespace gpudoctor
