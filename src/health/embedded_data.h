// Data files compiled into gd_health (see CMakeLists.txt): the binary needs
// no data directory at run time.
#pragma once

namespace gpudoctor {

extern const char kRulesToml[];        // data/rules.toml
extern const char kCudaDriverTable[];  // data/cuda_driver_table.tsv
extern const char kCorrelationsToml[];  // data/correlations.toml

}  // namespace gpudoctor
