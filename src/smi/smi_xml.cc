// `nvidia-smi -q -x`: an <nvidia_smi_log> with one <gpu> element per GPU.

#include <pugixml.hpp>

#include <string>
#include <utility>

#include "common/text.h"
#include "smi/smi_fields.h"
#include "smi/smi_formats.h"
#include "smi/smi_values.h"

namespace gpudoctor::smi {
namespace {

// nvidia-smi's tree is five levels deep below <gpu>; anything deeper is not
// its and is not walked (which also bounds the recursion on hostile input).
constexpr int kMaxDepth = 8;

// Applies every leaf element below `node` by its path, e.g. "temperature/gpu_temp".
size_t ApplyLeaves(const pugi::xml_node& node, std::string& path, int depth, GpuSnapshot& gpu) {
  size_t recognised = 0;
  for (pugi::xml_node child = node.first_child(); child; child = child.next_sibling()) {
    if (child.type() != pugi::node_element) continue;
    const size_t parent_length = path.size();
    if (!path.empty()) path += '/';
    path += child.name();
    if (!child.find_child([](const pugi::xml_node& n) { return n.type() == pugi::node_element; })) {
      if (ApplyGpuReading(ReadingNaming::kXml, path, child.child_value(), gpu)) ++recognised;
    } else if (depth < kMaxDepth) {
      recognised += ApplyLeaves(child, path, depth + 1, gpu);
    }
    path.resize(parent_length);
  }
  return recognised;
}

}  // namespace

Result<size_t> ParseXmlLog(std::string_view text, Snapshot& snapshot) {
  pugi::xml_document document;
  // On malformed or truncated input pugixml reports an error but keeps the
  // tree it built up to that point, which is what we want from a cut capture.
  const pugi::xml_parse_result parsed =
      document.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  const pugi::xml_node log = document.child("nvidia_smi_log");
  if (!log) {
    return Error{std::string("not recognised as nvidia-smi output: XML without an <nvidia_smi_log> element") +
                 (parsed ? "" : std::string(" (") + parsed.description() + ")")};
  }
  if (!parsed) {
    snapshot.incomplete_reasons.push_back("the XML is cut short or damaged: " + std::string(parsed.description()) +
                                          " at byte " + std::to_string(parsed.offset) + " of " +
                                          std::to_string(text.size()));
  }
  size_t recognised = 1;
  for (pugi::xml_node child = log.first_child(); child; child = child.next_sibling()) {
    const std::string_view name = child.name();
    const std::string_view value = Trim(child.child_value());
    if (name == "timestamp") {
      if (auto time = ParseSmiTimestamp(value)) snapshot.taken_at = *time;
    } else if (name == "driver_version") {
      snapshot.driver_version = TextField(value);
    } else if (name == "cuda_version") {
      if (auto version = ParseCudaVersion(value)) snapshot.cuda_driver_version = Field<int32_t>::Value(*version);
    } else if (name == "attached_gpus") {
      snapshot.device_count = NumberField<uint32_t>(value);
    } else if (name == "gpu") {
      if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
      GpuSnapshot gpu;
      gpu.index = static_cast<uint32_t>(snapshot.gpus.size());  // nvidia-smi lists GPUs in index order
      if (const char* bus_id = child.attribute("id").value(); *bus_id != '\0') gpu.pci_bus_id = PciBusIdField(bus_id);
      std::string path;
      recognised += ApplyLeaves(child, path, 1, gpu);
      snapshot.gpus.push_back(std::move(gpu));
    } else {
      continue;
    }
    ++recognised;
  }
  return recognised;
}

}  // namespace gpudoctor::smi
