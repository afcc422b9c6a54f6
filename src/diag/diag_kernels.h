// The diag kernels compiled into this binary, described from their own PTX text: what `--version` and the
// agent's gpudoctor_build_info say about them is what the driver would be given.
//
//   for (const DiagKernelSet& set : BuiltInDiagKernels())
//     if (set.built) fmt::print("{}: PTX ISA {} for {}\n", set.name, set.ptx_isa, set.target);
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpudoctor {

struct DiagKernelSet {
  std::string name;     // "memtest", "burn"
  bool built = false;   // false: built without a PTX compiler, so these tests cannot run
  std::string ptx_isa;  // "7.8", from `.version`; empty when not built or not stated
  std::string target;   // "sm_80", from `.target`; empty when not built or not stated
  size_t bytes = 0;     // size of the PTX text
};

// The header of one PTX text (`.version`, `.target`); `name` as given.
DiagKernelSet DescribePtx(std::string_view name, std::string_view ptx);

// Every kernel set of `gpudoctor diag`, in a fixed order.
std::vector<DiagKernelSet> BuiltInDiagKernels();

}  // namespace gpudoctor
