// Test support: files of the source tree (testdata/, examples/) read whole.
//
//   std::string sdr = ReadSourceFile("testdata/host/ipmitool_sdr_elist.txt");
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace gpudoctor {

// The bytes of `relative` under the source directory; empty when it cannot be read.
inline std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(GPUDOCTOR_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace gpudoctor
