#include "diag/diag_kernels.h"

#include <algorithm>

namespace gpudoctor {

extern const char kMemtestPtx[];  // memtest_kernels.cu as PTX; empty when built without clang
extern const char kBurnPtx[];     // burn_kernels.cu as PTX

namespace {

// The rest of the line after `directive` and its blanks, at the start of a line of `ptx`; empty when absent.
std::string DirectiveValue(std::string_view ptx, std::string_view directive) {
  for (size_t start = 0; start < ptx.size();) {
    size_t end = ptx.find('\n', start);
    if (end == std::string_view::npos) end = ptx.size();
    std::string_view line = ptx.substr(start, end - start);
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos) line.remove_prefix(first);
    if (line.size() > directive.size() && line.substr(0, directive.size()) == directive &&
        (line[directive.size()] == ' ' || line[directive.size()] == '\t')) {
      line.remove_prefix(directive.size());
      line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
      return std::string(line.substr(0, line.find_last_not_of(" \t\r") + 1));
    }
    start = end + 1;
  }
  return {};
}

}  // namespace

DiagKernelSet DescribePtx(std::string_view name, std::string_view ptx) {
  DiagKernelSet set{.name = std::string(name), .built = !ptx.empty(), .bytes = ptx.size()};
  if (!set.built) return set;
  set.ptx_isa = DirectiveValue(ptx, ".version");
  set.target = DirectiveValue(ptx, ".target");
  return set;
}

std::vector<DiagKernelSet> BuiltInDiagKernels() {
  return {DescribePtx("memtest", kMemtestPtx), DescribePtx("burn", kBurnPtx)};
}

}  // namespace gpudoctor
