/* The least any isolated collector pays per snapshot on this machine: a
 * parent and a child process exchanging one small request and one answer of
 * ANSWER_BYTES over pipes, the parent waiting in poll() as gpudoctor's
 * collector does. No NVML, no encoding: only the system calls, the two
 * wake-ups and the copies.
 *
 *   ipc_floor ROUND_TRIPS ANSWER_BYTES
 * prints "ipc_cpu_us_per_round_trip=<n> parent_us=<n> child_us=<n>".
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static double cpu_us(const struct rusage* r) {
  return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e6 + r->ru_utime.tv_usec + r->ru_stime.tv_usec;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: ipc_floor ROUND_TRIPS ANSWER_BYTES\n"); return 64; }
  const int trips = atoi(argv[1]);
  const int answer = atoi(argv[2]);
  if (trips <= 0 || answer <= 0 || answer > (1 << 20)) { fprintf(stderr, "ipc_floor: bad arguments\n"); return 64; }
  static char buffer[1 << 20];
  int request[2], reply[2];
  if (pipe(request) != 0 || pipe(reply) != 0) { perror("pipe"); return 71; }
  pid_t child = fork();
  if (child < 0) { perror("fork"); return 71; }
  if (child == 0) {
    close(request[1]);
    close(reply[0]);
    char byte;
    while (read(request[0], &byte, 1) == 1) {
      for (int sent = 0; sent < answer;) {
        ssize_t n = write(reply[1], buffer + sent, (size_t)(answer - sent));
        if (n <= 0) _exit(1);
        sent += (int)n;
      }
    }
    _exit(0);
  }
  close(request[0]);
  close(reply[1]);
  struct rusage before, after, children;
  getrusage(RUSAGE_SELF, &before);
  for (int i = 0; i < trips; ++i) {
    if (write(request[1], "r", 1) != 1) { perror("write"); return 71; }
    for (int got = 0; got < answer;) {
      struct pollfd fd = {reply[0], POLLIN, 0};
      if (poll(&fd, 1, 10000) <= 0) { fprintf(stderr, "ipc_floor: no answer\n"); return 71; }
      ssize_t n = read(reply[0], buffer, sizeof buffer);
      if (n <= 0) { fprintf(stderr, "ipc_floor: child went away\n"); return 71; }
      got += (int)n;
    }
  }
  close(request[1]);
  waitpid(child, NULL, 0);
  getrusage(RUSAGE_SELF, &after);
  getrusage(RUSAGE_CHILDREN, &children);
  const double parent = cpu_us(&after) - cpu_us(&before), kid = cpu_us(&children);
  printf("ipc_cpu_us_per_round_trip=%.1f parent_us=%.1f child_us=%.1f\n", (parent + kid) / trips, parent / trips,
         kid / trips);
  return 0;
}
