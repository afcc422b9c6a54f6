#include "fleet/fleet_reader.h"

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "common/text.h"
#include "net/http_client.h"
#include "net/prometheus_text_stream.h"
#include "redact/secrets.h"

namespace gpudoctor {
namespace {

using Labels = std::map<std::string, std::string>;

// The families HostBuilder reads from an agent's /metrics.
const std::set<std::string_view> kAgentFamilies = {"gpudoctor_up",       "gpudoctor_sample_age_seconds",
                                                   "gpudoctor_host_info", "gpudoctor_gpu_info",
                                                   "gpudoctor_gpu_accessible", "gpudoctor_finding",
                                                   "gpudoctor_checklist_item"};

// A label's value, on one line: agents are not trusted to send names without newlines.
std::string LabelOf(const Labels& labels, const std::string& name) {
  auto found = labels.find(name);
  return found == labels.end() ? std::string() : OneLine(found->second);
}

// Fills a host from its agent's samples, whichever way they were read.
class HostBuilder {
 public:
  explicit HostBuilder(std::string instance) { host_.instance = std::move(instance); }

  void Add(const std::string& name, const Labels& labels, double value) {
    if (host_.hostname.empty()) host_.hostname = LabelOf(labels, "hostname");
    if (name == "gpudoctor_up") {
      fresh_ = value == 1;
    } else if (name == "gpudoctor_sample_age_seconds") {
      host_.sample_age_seconds = value;
    } else if (name == "gpudoctor_host_info") {
      host_.board_serial = LabelOf(labels, "board_serial");
    } else if (name == "gpudoctor_gpu_info") {
      FleetGpu& gpu = Gpu(LabelOf(labels, "gpu"));
      gpu.uuid = LabelOf(labels, "uuid");
      gpu.serial = LabelOf(labels, "serial");
      gpu.pci_bus_id = LabelOf(labels, "pci_bus_id");
      gpu.slot = LabelOf(labels, "slot");
      gpu.name = LabelOf(labels, "name");
    } else if (name == "gpudoctor_gpu_accessible") {
      Gpu(LabelOf(labels, "gpu")).accessible = value == 1;
    } else if (name == "gpudoctor_finding" && value == 1) {
      host_.findings.push_back({.id = LabelOf(labels, "id"),
                                .severity = LabelOf(labels, "severity"),
                                .gpu = LabelOf(labels, "gpu"),
                                .subject = LabelOf(labels, "subject"),
                                .part_of = LabelOf(labels, "part_of")});
    } else if (name == "gpudoctor_checklist_item" && value == 1) {
      if (!host_.checklist) host_.checklist.emplace();
      host_.checklist->push_back(
          {.title = LabelOf(labels, "item"), .state = LabelOf(labels, "state"), .reason = LabelOf(labels, "reason")});
    }
  }

  void Remember(const std::string& hostname, const std::string& board_serial) {
    if (host_.hostname.empty()) host_.hostname = hostname;
    if (host_.board_serial.empty()) host_.board_serial = board_serial;
  }

  // What an answer that was refused or cut short said is not believed.
  void NotAnswering(std::string why) {
    host_.answering = false;
    host_.trouble = std::move(why);
    host_.findings.clear();
    host_.findings.shrink_to_fit();
    host_.checklist.reset();
    gpus_.clear();
  }

  FleetHost Build() && {
    if (host_.answering && !fresh_) {
      host_.answering = false;
      host_.trouble = host_.sample_age_seconds
                          ? fmt::format("sampling stalled: the latest GPU sample is {} old",
                                        FormatDuration(std::chrono::seconds(
                                            static_cast<int64_t>(*host_.sample_age_seconds))))
                          : std::string("sampling stalled: no GPU sample yet");
    }
    if (host_.hostname.empty()) host_.hostname = host_.instance;
    for (auto& [index, gpu] : gpus_) host_.gpus.push_back(std::move(gpu));
    std::sort(host_.gpus.begin(), host_.gpus.end(), [](const FleetGpu& a, const FleetGpu& b) {
      return ParseInt<int>(a.index).value_or(-1) < ParseInt<int>(b.index).value_or(-1);
    });
    return std::move(host_);
  }

 private:
  FleetGpu& Gpu(const std::string& index) {
    FleetGpu& gpu = gpus_[index];
    gpu.index = index;
    return gpu;
  }

  FleetHost host_;
  bool fresh_ = false;
  std::map<std::string, FleetGpu> gpus_;
};

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void SortHosts(std::vector<FleetHost>& hosts) {
  std::sort(hosts.begin(), hosts.end(), [](const FleetHost& a, const FleetHost& b) {
    return std::tie(a.hostname, a.instance) < std::tie(b.hostname, b.instance);
  });
}

}  // namespace

Result<FleetState> ReadFleetFromPrometheus(PrometheusApi& api, const FleetReadOptions& options) {
  const std::string job = "job=" + Quoted(options.job);
  Result<std::vector<PromSeries>> targets = api.Query("up{" + job + "}", options.at);
  if (!targets) return targets.error();
  Result<std::vector<PromSeries>> samples = api.Query(
      "{" + job +
          ",__name__=~\"gpudoctor_(up|sample_age_seconds|host_info|gpu_info|gpu_accessible|finding|checklist_item)\"}",
      options.at);
  if (!samples) return samples.error();
  // A host whose scrape fails has no current samples: its name comes from the last it gave.
  Result<std::vector<PromSeries>> known = api.Query(
      fmt::format("last_over_time(gpudoctor_host_info{{{}}}[{}])", job, PromDuration(options.remember)), options.at);
  if (!known) return known.error();

  std::map<std::string, HostBuilder> builders;
  auto builder = [&](const std::string& instance) -> HostBuilder& {
    return builders.try_emplace(instance, instance).first->second;
  };
  for (const PromSeries& target : *targets) {
    HostBuilder& host = builder(target.Label("instance"));
    if (target.points.empty() || target.points.back().value != 1) {
      host.NotAnswering("not answering: Prometheus cannot scrape it (up == 0)");
    }
  }
  for (const PromSeries& series : *samples) {
    if (series.points.empty()) continue;
    auto found = builders.find(series.Label("instance"));
    if (found == builders.end()) continue;  // a target no longer in the job
    found->second.Add(series.Label("__name__"), series.labels, series.points.back().value);
  }
  for (const PromSeries& series : *known) {
    auto found = builders.find(series.Label("instance"));
    if (found != builders.end()) found->second.Remember(series.Label("hostname"), series.Label("board_serial"));
  }
  if (builders.empty()) {
    return Error{fmt::format("Prometheus has no target in job \"{}\" (is --job right? `up{{{}}}` is empty)",
                             options.job, job)};
  }
  FleetState state{.at = options.at};
  for (auto& [instance, host] : builders) state.hosts.push_back(std::move(host).Build());
  SortHosts(state.hosts);
  return state;
}

FleetState ReadFleetFromAgents(const std::vector<std::string>& urls, const FleetReadOptions& options) {
  auto scrape = [&options](const std::string& url) {
    Result<HttpUrl> parsed = ParseHttpUrl(url);
    HostBuilder host(parsed ? parsed->shown : RedactTextSecrets(url));
    if (!parsed) {
      host.NotAnswering(parsed.error().message);
      return std::move(host).Build();
    }
    // Read as it arrives, keeping only the families the views need: an
    // agent that answers with gigabytes costs a line and the samples kept.
    PromTextStream stream([](std::string_view name) { return kAgentFamilies.contains(name); },
                          [&host](PromSample sample) { host.Add(sample.name, sample.labels, sample.value); });
    HttpRequestSpec request{.origin = parsed->origin,
                            .path = parsed->path + "/metrics",
                            .user = parsed->user,
                            .password = parsed->password,
                            .timeout = options.timeout,
                            .max_body_bytes = kMaxAgentMetricsBytes,
                            .on_body = [&stream](std::string_view piece) { return stream.Feed(piece); }};
    if (!options.bearer_token.empty()) request.headers.emplace_back("Authorization", "Bearer " + options.bearer_token);
    Result<HttpAnswer> answer = SendHttp(request);
    if (!answer && !stream.error().empty()) {
      host.NotAnswering("not answering: /metrics is not Prometheus text: " + stream.error());
    } else if (!answer) {
      host.NotAnswering("not answering: no answer from /metrics (" + answer.error().message + ")");
    } else if (answer->status != 200) {
      host.NotAnswering(fmt::format("not answering: /metrics answered HTTP {}", answer->status));
    } else if (Status finished = stream.Finish(); !finished) {
      host.NotAnswering("not answering: /metrics is not Prometheus text: " + finished.error().message);
    }
    return std::move(host).Build();
  };
  // A few scrapes at a time: a fleet of slow agents costs its slowest batch, not the sum.
  constexpr size_t kParallel = 16;
  FleetState state{.at = options.at};
  for (size_t begin = 0; begin < urls.size(); begin += kParallel) {
    std::vector<std::future<FleetHost>> batch;
    for (size_t i = begin; i < std::min(urls.size(), begin + kParallel); ++i) {
      batch.push_back(std::async(std::launch::async, scrape, urls[i]));
    }
    for (auto& host : batch) state.hosts.push_back(host.get());
  }
  SortHosts(state.hosts);
  return state;
}

Result<std::vector<std::string>> ParseAgentsList(std::string_view text, const std::string& path) {
  std::vector<std::string> urls;
  int line_number = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_number;
    line = Trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::string url(line);
    if (auto parsed = ParseHttpUrl(url); !parsed) {
      return Error{fmt::format("{}:{}: {}", path, line_number, parsed.error().message)};
    } else if (parsed->path.find('?') != std::string::npos) {
      return Error{fmt::format("{}:{}: {}: give the agent's base URL, without a query string", path, line_number,
                               parsed->shown)};
    }
    urls.push_back(std::move(url));
  }
  if (urls.empty()) return Error{path + ": no agent URL in it"};
  return urls;
}

}  // namespace gpudoctor
