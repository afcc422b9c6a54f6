#include "nvml/probe_wire.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpudoctor {
namespace {

// A GPU with every kind of field state and every list filled.
GpuSnapshot SampleGpu() {
  GpuSnapshot gpu;
  gpu.index = 3;
  gpu.name = Field<std::string>::Value("NVIDIA H100 80GB HBM3");
  gpu.uuid = Field<std::string>::Value("GPU-0b6b1f8e-0000-4000-8000-000000000003");
  gpu.serial = Field<std::string>::Failed("Unknown Error");
  gpu.persistence_mode = Field<bool>::Value(true);
  gpu.pci_bus_id = Field<std::string>::Value("0000:1b:00.0");
  gpu.pcie_replay_count = Field<uint64_t>::Value(uint64_t{1} << 40);
  gpu.temperature_c = Field<uint32_t>::Value(71);
  gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({30, 0, 100});
  gpu.power_draw_w = Field<double>::Value(612.25);
  gpu.clock_event_reasons = Field<uint64_t>::Value(0x48);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value(
      {{4242, "python3", Field<uint64_t>::Value(uint64_t{40} << 30)}, {7, "", Field<uint64_t>::NotSupported()}});
  NvLinkInfo link;
  link.link = 17;
  link.active = Field<bool>::Value(false);
  link.replay_errors = Field<uint64_t>::Value(12);
  link.crc_data_errors = Field<uint64_t>::Failed("GPU is lost");
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({link});
  gpu.access_error = AccessError::kGpuLost;
  gpu.access_message = "the GPU has fallen off the bus";
  return gpu;
}

std::vector<ProbeMessage> EveryKindOfMessage() {
  ProbeRequest request;
  request.skip_gpus = {1, 5};
  request.event_window = std::chrono::milliseconds(250);
  ProbeHost host;
  host.driver_version = Field<std::string>::Value("550.54.15");
  host.nvml_version = Field<std::string>::NotSupported();
  host.cuda_driver_version = Field<int32_t>::Value(12040);
  host.device_count = Field<uint32_t>::Failed("Driver Not Loaded");
  XidEvent xid{2, 79, WallTime(std::chrono::milliseconds(1733140000123))};
  return {request, host, ProbeInitFailed{AccessError::kVersionMismatch, "Driver/library version mismatch"},
          ProbeGpuIdentity{4, "0000:9a:00.0"}, SampleGpu(), GpuSnapshot{}, xid, ProbeDone{}};
}

std::string_view Payload(const std::string& frame) { return std::string_view(frame).substr(sizeof(uint32_t)); }

Result<ProbeMessage> Decode(std::string_view payload) {
  ProbeMessage message;
  Status status = DecodeProbeMessage(payload, message);
  if (!status.ok()) return status.error();
  return message;
}

TEST(ProbeWire, EveryMessageSurvivesTheRoundTrip) {
  for (const ProbeMessage& message : EveryKindOfMessage()) {
    const std::string frame = EncodeProbeMessage(message);
    auto decoded = Decode(Payload(frame));
    ASSERT_TRUE(decoded) << decoded.error().message;
    EXPECT_EQ(decoded->index(), message.index());
    EXPECT_TRUE(*decoded == message) << "message kind " << message.index();
  }
}

TEST(ProbeWire, EveryTruncationIsRejected) {
  for (const ProbeMessage& message : EveryKindOfMessage()) {
    const std::string frame = EncodeProbeMessage(message);
    const std::string_view payload = Payload(frame);
    for (size_t cut = 0; cut < payload.size(); ++cut) {
      auto decoded = Decode(payload.substr(0, cut));
      ASSERT_FALSE(decoded) << "kind " << message.index() << " cut at " << cut;
      EXPECT_FALSE(decoded.error().message.empty());
    }
  }
}

TEST(ProbeWire, GarbageIsRejectedWithAReason) {
  EXPECT_FALSE(Decode(""));
  EXPECT_FALSE(Decode("\x7f"));  // unknown kind
  std::string frame = EncodeProbeMessage(ProbeDone{});
  frame.push_back('x');  // trailing byte
  auto trailing = Decode(Payload(frame));
  ASSERT_FALSE(trailing);
  EXPECT_NE(trailing.error().message.find("trailing"), std::string::npos);
  // An impossible field state inside a GPU.
  std::string gpu = EncodeProbeMessage(SampleGpu());
  gpu[sizeof(uint32_t) + 1 + sizeof(uint32_t) + 1 + sizeof(uint32_t) + SampleGpu().access_message.size()] = 9;
  EXPECT_FALSE(Decode(Payload(gpu)));
}

TEST(ProbeWire, GpuFramesDecodeStraightIntoASnapshot) {
  const GpuSnapshot sample = SampleGpu();
  const std::string frame = EncodeProbeMessage(sample);
  ASSERT_TRUE(IsGpuSnapshotFrame(Payload(frame)));
  GpuSnapshot gpu;
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(frame), gpu).ok());
  EXPECT_TRUE(gpu == sample);
  // Frames appended one after another decode the same as frames encoded alone.
  std::string two;
  AppendProbeFrame(two, ProbeDone{});
  AppendProbeFrame(two, sample);
  EXPECT_EQ(two, EncodeProbeMessage(ProbeDone{}) + frame);

  for (const ProbeMessage& other : EveryKindOfMessage()) {
    if (std::holds_alternative<GpuSnapshot>(other)) continue;
    const std::string encoded = EncodeProbeMessage(other);
    EXPECT_FALSE(IsGpuSnapshotFrame(Payload(encoded)));
    GpuSnapshot ignored;
    EXPECT_FALSE(DecodeGpuSnapshot(Payload(encoded), ignored).ok());
  }
  const std::string_view payload = Payload(frame);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    GpuSnapshot truncated;
    EXPECT_FALSE(DecodeGpuSnapshot(payload.substr(0, cut), truncated).ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(IsGpuSnapshotFrame(""));
}

TEST(ProbeWire, NonFiniteReadingsAreRejected) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    GpuSnapshot gpu = SampleGpu();
    gpu.power_draw_w = Field<double>::Value(bad);
    const std::string frame = EncodeProbeMessage(gpu);
    GpuSnapshot decoded;
    EXPECT_FALSE(DecodeGpuSnapshot(Payload(frame), decoded).ok()) << bad;
    EXPECT_FALSE(Decode(Payload(frame))) << bad;
  }
}

TEST(ProbeFrameBuffer, HandsOutFramesAsTheyComplete) {
  std::string stream;
  for (const ProbeMessage& message : EveryKindOfMessage()) stream += EncodeProbeMessage(message);
  ProbeFrameBuffer frames;
  std::vector<ProbeMessage> received;
  for (char byte : stream) {  // the worst case: one byte per read
    frames.Append(std::string_view(&byte, 1));
    while (auto payload = frames.Next()) {
      auto message = Decode(*payload);
      ASSERT_TRUE(message) << message.error().message;
      received.push_back(std::move(*message));
    }
  }
  EXPECT_TRUE(received == EveryKindOfMessage());
  EXPECT_FALSE(frames.corrupt());
}

TEST(ProbeFrameBuffer, AnAbsurdLengthMarksTheStreamCorrupt) {
  ProbeFrameBuffer frames;
  const uint32_t length = ProbeFrameBuffer::kMaxFrameBytes + 1;
  frames.Append(std::string_view(reinterpret_cast<const char*>(&length), sizeof length));
  EXPECT_FALSE(frames.Next());
  EXPECT_TRUE(frames.corrupt());
  frames.Append(EncodeProbeMessage(ProbeDone{}));
  EXPECT_FALSE(frames.Next());
}

}  // namespace
}  // namespace gpudoctor
