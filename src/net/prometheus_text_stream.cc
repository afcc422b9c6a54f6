#include "net/prometheus_text_stream.h"

#include <fmt/format.h>

namespace gpudoctor {

PromTextStream::PromTextStream(std::function<bool(std::string_view)> wanted, std::function<void(PromSample)> sink,
                               PromTextLimits limits)
    : wanted_(std::move(wanted)), sink_(std::move(sink)), limits_(limits) {}

bool PromTextStream::Refuse(std::string why) {
  if (error_.empty()) error_ = std::move(why);
  partial_.clear();
  partial_.shrink_to_fit();
  return false;
}

bool PromTextStream::Feed(std::string_view piece) {
  if (!error_.empty()) return false;
  while (!piece.empty()) {
    const size_t newline = piece.find('\n');
    if (newline == std::string_view::npos) {
      if (partial_.size() + piece.size() > limits_.max_line_bytes)
        return Refuse(fmt::format("line {}: longer than {} bytes", lines_ + 1, limits_.max_line_bytes));
      partial_.append(piece);
      return true;
    }
    const std::string_view rest_of_line = piece.substr(0, newline);
    piece.remove_prefix(newline + 1);
    if (partial_.empty()) {
      if (rest_of_line.size() > limits_.max_line_bytes)
        return Refuse(fmt::format("line {}: longer than {} bytes", lines_ + 1, limits_.max_line_bytes));
      if (!Line(rest_of_line)) return false;
      continue;
    }
    if (partial_.size() + rest_of_line.size() > limits_.max_line_bytes)
      return Refuse(fmt::format("line {}: longer than {} bytes", lines_ + 1, limits_.max_line_bytes));
    partial_.append(rest_of_line);
    const std::string line = std::move(partial_);
    partial_.clear();
    if (!Line(line)) return false;
  }
  return true;
}

Status PromTextStream::Finish() {
  if (error_.empty() && !partial_.empty()) {
    const std::string line = std::move(partial_);
    partial_.clear();
    Line(line);
  }
  if (!error_.empty()) return Error{error_};
  return {};
}

bool PromTextStream::Line(std::string_view line) {
  ++lines_;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty() || line.front() == '#') return true;
  const std::string_view name = PrometheusSampleName(line);
  if (name.empty()) return Refuse(fmt::format("line {}: not a sample, a comment or a blank line", lines_));
  if (!wanted_(name)) return true;
  Result<PromSample> sample = ParsePrometheusSample(line);
  if (!sample) return Refuse(fmt::format("line {}: {}", lines_, sample.error().message));
  // What the sample costs to keep: its text, and a map node per label.
  size_t cost = sample->name.size() + sizeof(PromSample);
  for (const auto& [label, value] : sample->labels) cost += label.size() + value.size() + 64;
  kept_bytes_ += cost;
  if (kept_bytes_ > limits_.max_kept_bytes)
    return Refuse(fmt::format("more samples than the {} bytes kept from one answer", limits_.max_kept_bytes));
  sink_(std::move(*sample));
  return true;
}

}  // namespace gpudoctor
