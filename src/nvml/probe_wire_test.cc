#include "nvml/probe_wire.h"
#include "nvml/probe_wire_writer.h"
#include "model/gpu_fields.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <type_traits>

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
          SampleGpu(), GpuSnapshot{}, xid, ProbeDone{}};
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
  // An impossible field state inside a GPU: the first record's, after the
  // frame's length, its kind, the GPU's index and the record's position.
  std::string gpu = EncodeProbeMessage(SampleGpu());
  const size_t first_record = sizeof(uint32_t) + 1 + sizeof(uint32_t);
  ASSERT_EQ(gpu[first_record], 0) << "the first record is the name";
  gpu[first_record + 1] = 9;
  EXPECT_FALSE(Decode(Payload(gpu)));
}

TEST(ProbeWire, TheProbesEncoderWritesWhatTheDecoderReadsBack) {
  // The probe writes a GPU's fields as it reads them; the frame must decode
  // to the same GpuSnapshot as one encoded from the model.
  const GpuSnapshot sample = SampleGpu();
  std::string frame;
  GpuFrameEncoder gpu(frame, sample.index);
  gpu.Value<&GpuSnapshot::name>(std::string_view("NVIDIA H100 80GB HBM3"));
  gpu.Value<&GpuSnapshot::uuid>(std::string("GPU-0b6b1f8e-0000-4000-8000-000000000003"));
  gpu.Failed<&GpuSnapshot::serial>("Unknown Error");
  gpu.Value<&GpuSnapshot::persistence_mode>(1);
  gpu.Value<&GpuSnapshot::pci_bus_id>(std::string_view("0000:1b:00.0"));
  gpu.Value<&GpuSnapshot::pcie_replay_count>(uint64_t{1} << 40);
  gpu.Value<&GpuSnapshot::temperature_c>(71u);
  gpu.Value<&GpuSnapshot::fan_speeds_percent>(std::vector<uint32_t>{30, 0, 100});
  gpu.Value<&GpuSnapshot::power_draw_w>(612.25);
  gpu.Value<&GpuSnapshot::clock_event_reasons>(0x48ull);
  gpu.Processes(sample.processes.value());
  for (const NvLinkInfo& link : sample.nvlinks.value()) gpu.NvLink(link);
  gpu.EndNvLinks();
  gpu.Finish(sample.access_error, sample.access_message);
  EXPECT_EQ(frame, EncodeProbeMessage(sample));
  GpuSnapshot decoded;
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(frame), decoded).ok());
  EXPECT_TRUE(decoded == sample);
}

TEST(ProbeWire, AGpuFrameWithFieldsOutOfOrderIsRejected) {
  std::string frame;
  GpuFrameEncoder gpu(frame, 0);
  gpu.Value<&GpuSnapshot::temperature_c>(70u);
  gpu.Value<&GpuSnapshot::name>(std::string_view("NVIDIA H100 80GB HBM3"));  // belongs before the temperature
  gpu.Finish(AccessError::kNone, "");
  GpuSnapshot decoded;
  EXPECT_FALSE(DecodeGpuSnapshot(Payload(frame), decoded).ok());

  std::string twice;
  GpuFrameEncoder repeated(twice, 0);
  repeated.Value<&GpuSnapshot::temperature_c>(70u);
  repeated.Value<&GpuSnapshot::temperature_c>(71u);
  repeated.Finish(AccessError::kNone, "");
  EXPECT_FALSE(DecodeGpuSnapshot(Payload(twice), decoded).ok());

  std::string no_links;  // EndNvLinks without a link writes nothing
  GpuFrameEncoder none(no_links, 0);
  none.EndNvLinks();
  none.Finish(AccessError::kNone, "");
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(no_links), decoded).ok());
  EXPECT_TRUE(decoded.nvlinks.not_supported());
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

// A GPU with a value in every field, 3 processes and 18 NVLinks.
GpuSnapshot FullGpu() {
  GpuSnapshot gpu = SampleGpu();
  gpu.serial = Field<std::string>::Value("1654922006530");
  gpu.access_error = AccessError::kNone;
  gpu.access_message.clear();
  uint32_t n = 1;
  auto fill = [&n](const char*, auto& field) {
    using T = typename std::remove_reference_t<decltype(field)>::value_type;
    if constexpr (std::is_same_v<T, bool>) {
      field.SetValue(n % 2 == 1);
    } else if constexpr (std::is_arithmetic_v<T>) {
      field.SetValue(static_cast<T>(n * 11));
    } else if constexpr (std::is_same_v<T, std::string>) {
      field.SetValue("a value long enough to be kept on the heap, number " + std::to_string(n));
    } else {
      field.SetValue(T(n % 4 + 1));
    }
    ++n;
  };
  VisitScalarGpuFields(fill, gpu);
  gpu.processes = Field<std::vector<ProcessInfo>>::Value(
      {{1, "python3 train.py --config a-rather-long-name.yaml", Field<uint64_t>::Value(1 << 30)},
       {2, "b", Field<uint64_t>::Value(2)},
       {3, "c", Field<uint64_t>::Failed("Insufficient Permissions")}});
  std::vector<NvLinkInfo> links(18);
  for (uint32_t i = 0; i < links.size(); ++i) {
    links[i].link = i;
    links[i].active = Field<bool>::Value(i % 3 != 0);
    links[i].replay_errors = Field<uint64_t>::Value(i);
    links[i].recovery_errors = Field<uint64_t>::Value(i * 2);
    links[i].crc_flit_errors = Field<uint64_t>::Value(uint64_t{1} << (i + 20));
    links[i].crc_data_errors = Field<uint64_t>::Value(0);
  }
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value(links);
  return gpu;
}

GpuSnapshot LostGpu() {
  GpuSnapshot gpu;
  gpu.index = 6;
  gpu.MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  gpu.pci_bus_id = Field<std::string>::Value("0000:d1:00.0");
  return gpu;
}

TEST(ProbeWire, AGpuDecodedOverAnotherIsExactlyTheNewOne) {
  // The collector refills the GPUs of the snapshot it is given: what an
  // earlier GPU left in a GpuSnapshot must never show through.
  const std::vector<GpuSnapshot> gpus = {SampleGpu(), FullGpu(), GpuSnapshot{}, LostGpu()};
  for (size_t before = 0; before < gpus.size(); ++before) {
    for (size_t after = 0; after < gpus.size(); ++after) {
      GpuSnapshot gpu;
      ASSERT_TRUE(DecodeGpuSnapshot(Payload(EncodeProbeMessage(gpus[before])), gpu).ok());
      ASSERT_TRUE(gpu == gpus[before]) << before;
      ASSERT_TRUE(DecodeGpuSnapshot(Payload(EncodeProbeMessage(gpus[after])), gpu).ok());
      EXPECT_TRUE(gpu == gpus[after]) << before << " then " << after;
    }
  }
}

TEST(ProbeWire, NvLinksRoundTripInEveryState) {
  // Each of a link's five fields in turn not supported, then failed, with
  // the others read; and the encoder's shortcut for a link read in full.
  std::vector<NvLinkInfo> links;
  for (int state = 0; state < 2; ++state) {
    for (int which = 0; which < 5; ++which) {
      NvLinkInfo link = FullGpu().nvlinks.value()[5];
      link.link = static_cast<uint32_t>(links.size());
      int at = 0;
      auto spoil = [&](const char*, auto& field) {
        if (at++ != which) return;
        if (state == 0) field.SetNotSupported();
        else field.SetFailed("Unknown Error");
      };
      VisitNvLinkFields(spoil, link);
      links.push_back(link);
    }
  }
  GpuSnapshot gpu;
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value(links);
  GpuSnapshot decoded;
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(EncodeProbeMessage(gpu)), decoded).ok());
  EXPECT_TRUE(decoded == gpu);

  const GpuSnapshot full = FullGpu();
  std::string shortcut, general;
  GpuFrameEncoder fast(shortcut, 0), slow(general, 0);
  for (const NvLinkInfo& link : full.nvlinks.value()) {
    const uint64_t counters[4] = {link.replay_errors.value(), link.recovery_errors.value(),
                                  link.crc_flit_errors.value(), link.crc_data_errors.value()};
    fast.NvLink(link.link, link.active.value(), counters);
    slow.NvLink(link);
  }
  for (GpuFrameEncoder* encoder : {&fast, &slow}) {
    encoder->EndNvLinks();
    encoder->Finish(AccessError::kNone, "");
  }
  EXPECT_EQ(shortcut, general);
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(shortcut), decoded).ok());
  EXPECT_TRUE(decoded.nvlinks == full.nvlinks);
}

TEST(ProbeWire, AnNvLinkWrittenTwoWaysOrOutOfRangeIsRejected) {
  GpuSnapshot gpu;
  NvLinkInfo link = FullGpu().nvlinks.value()[1];
  link.crc_data_errors.SetNotSupported();  // so the link takes the general form
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({link});
  const std::string frame = EncodeProbeMessage(gpu);
  // The link's mask follows its number; the mask byte is the only one equal to 0x0f.
  const size_t mask_at = frame.find('\x0f');
  ASSERT_NE(mask_at, std::string::npos);
  GpuSnapshot decoded;
  ASSERT_TRUE(DecodeGpuSnapshot(Payload(frame), decoded).ok());

  std::string extra_bit = frame;  // a bit beyond the five fields
  extra_bit[mask_at] = '\x2f';
  EXPECT_FALSE(DecodeGpuSnapshot(Payload(extra_bit), decoded).ok());

  // The unread field spelled as a value record where the mask says it has none.
  std::string two_ways = frame;
  const size_t state_at = two_ways.size() - 1 /*end*/ - 1 /*error*/ - 4 /*message*/ - 1 /*state*/;
  ASSERT_EQ(two_ways[state_at], static_cast<char>(FieldState::kNotSupported));
  two_ways[state_at] = static_cast<char>(FieldState::kValue);
  two_ways.insert(state_at + 1, std::string(8, '\0'));
  const uint32_t length = static_cast<uint32_t>(two_ways.size() - sizeof(uint32_t));
  std::memcpy(two_ways.data(), &length, sizeof length);
  EXPECT_FALSE(DecodeGpuSnapshot(Payload(two_ways), decoded).ok());

  // A link read in full whose state byte is neither 0 nor 1.
  GpuSnapshot full;
  full.nvlinks = Field<std::vector<NvLinkInfo>>::Value({FullGpu().nvlinks.value()[1]});
  std::string bad_state = EncodeProbeMessage(full);
  // The link record is the last thing before the end marker, access error and empty message (6 bytes).
  const size_t active_at =
      bad_state.size() - 6 - probe_wire_detail::kNvLinkAllValuesSize + probe_wire_detail::kNvLinkActiveAt;
  ASSERT_EQ(bad_state[active_at - 1], '\x1f');
  bad_state[active_at] = 2;
  EXPECT_FALSE(DecodeGpuSnapshot(Payload(bad_state), decoded).ok());
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

TEST(ProbeFrameBuffer, ReadsStraightFromADescriptorInAnySizeOfPiece) {
  std::string stream;
  for (int copy = 0; copy < 3; ++copy)
    for (const ProbeMessage& message : EveryKindOfMessage()) stream += EncodeProbeMessage(message);
  for (size_t piece : {size_t{1}, size_t{7}, size_t{500}, size_t{65536}}) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    ASSERT_EQ(write(fds[1], stream.data(), stream.size()), static_cast<ssize_t>(stream.size()));
    close(fds[1]);
    ProbeFrameBuffer frames;
    frames.Append("leftover from an earlier request");
    frames.Clear();  // starts over: nothing of the above is handed out
    std::vector<ProbeMessage> received;
    while (frames.ReadFrom(fds[0], piece) > 0) {
      while (auto payload = frames.Next()) {
        auto message = Decode(*payload);
        ASSERT_TRUE(message) << message.error().message << " with pieces of " << piece;
        received.push_back(std::move(*message));
      }
    }
    close(fds[0]);
    ASSERT_EQ(received.size(), 3 * EveryKindOfMessage().size()) << "pieces of " << piece;
    for (size_t i = 0; i < received.size(); ++i)
      EXPECT_TRUE(received[i] == EveryKindOfMessage()[i % EveryKindOfMessage().size()]) << i;
  }
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
