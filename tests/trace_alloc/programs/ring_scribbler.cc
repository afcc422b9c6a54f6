// A program that writes over the ring gpudoctor trace-alloc reads, as a
// buggy or hostile program could: its argument says how. Then it allocates
// (the library must not hang on a ring nobody reads any more) and exits 3.
//   head      the write position set to 2^62
//   behind    the write position set back to 0 after some records
//   random    the header and every slot filled with random bytes
//   dropped   the dropped-records counter set to 2^64 - 1
//   ignore-signals  no scribbling: ignores SIGINT and SIGTERM, prints "ready", sleeps 30 s
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "cuda_calls.h"
#include "trace_alloc/trace_wire.h"

using namespace gpudoctor::trace_wire;

__attribute__((noinline)) void AllocateSome(int count) {
  for (int i = 0; i < count; ++i) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, 4096));
    CHECK_CUDA(cudaFree(p));
  }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ignore-signals") {
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    std::printf("ready\n");
    std::fflush(stdout);
    sleep(30);
    return 0;
  }
  AllocateSome(10);
  const char* fd_text = std::getenv(kFdVariable);
  if (fd_text == nullptr) return 9;
  const int fd = std::atoi(fd_text);
  struct stat status;
  if (fstat(fd, &status) != 0) return 9;
  auto* bytes = static_cast<unsigned char*>(
      mmap(nullptr, static_cast<size_t>(status.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (bytes == MAP_FAILED) return 9;
  auto* header = reinterpret_cast<RingHeader*>(bytes);
  // Give the reader time to take what was written before.
  usleep(200'000);
  if (mode == "head") {
    header->head.store(uint64_t{1} << 62);
  } else if (mode == "behind") {
    header->head.store(0);
  } else if (mode == "random") {
    std::mt19937_64 random(42);
    for (off_t i = 0; i < status.st_size; ++i) bytes[i] = static_cast<unsigned char>(random());
  } else if (mode == "dropped") {
    header->records_dropped.store(~uint64_t{0});
  } else {
    return 9;
  }
  usleep(100'000);
  AllocateSome(10);  // must not wait for a reader that stopped reading
  return 3;
}
