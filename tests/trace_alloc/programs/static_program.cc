// A statically linked program: the dynamic loader never runs, so no library
// can be preloaded into it. gpudoctor trace-alloc must run it anyway and say so.
#include <cstdio>

int main() {
  std::printf("static program\n");
  return 0;
}
