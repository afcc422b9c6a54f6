/* The least any isolated collector pays per snapshot on this machine: a
 * parent and a child process exchanging one small request and one answer of
 * ANSWER_BYTES over pipes, the parent waiting in poll() as gpudoctor's
 * collector does. No NVML, no encoding: only the system calls, the two
 * wake-ups and the copies.
 *
 *   ipc_floor ROUND_TRIPS ANSWER_BYTES [WORK_US]
 * prints "ipc_cpu_us_per_round_trip=<n> parent_us=<n> child_us=<n>".
 *
 * With WORK_US, the child first works that long (CPU time, spinning) before
 * each answer, as a probe reads the GPUs before it answers; that work is left
 * out of the figures. It matters on machines, virtual ones above all, where
 * waking a CPU that went idle while the other worked costs far more than a
 * quick ping-pong.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_us(const struct rusage* r) {
  return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e6 + r->ru_utime.tv_usec + r->ru_stime.tv_usec;
}

static double thread_cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) { fprintf(stderr, "usage: ipc_floor ROUND_TRIPS ANSWER_BYTES [WORK_US]\n"); return 64; }
  const int trips = atoi(argv[1]);
  const int answer = atoi(argv[2]);
  const double work_us = argc == 4 ? atof(argv[3]) : 0;
  if (trips <= 0 || answer <= 0 || answer > (1 << 20) || work_us < 0 || work_us > 1e6) {
    fprintf(stderr, "ipc_floor: bad arguments\n");
    return 64;
  }
  static char buffer[1 << 20];
  int request[2], reply[2];
  if (pipe(request) != 0 || pipe(reply) != 0) { perror("pipe"); return 71; }
  pid_t child = fork();
  if (child < 0) { perror("fork"); return 71; }
  if (child == 0) {
    close(request[1]);
    close(reply[0]);
    char byte;
    double worked = 0;  /* CPU time spent on the stand-in for the probe's work */
    while (read(request[0], &byte, 1) == 1) {
      if (work_us > 0) {
        const double start = thread_cpu_us();
        double now = start;
        while (now - start < work_us) now = thread_cpu_us();
        worked += now - start;
      }
      for (int sent = 0; sent < answer;) {
        ssize_t n = write(reply[1], buffer + sent, (size_t)(answer - sent));
        if (n <= 0) _exit(1);
        sent += (int)n;
      }
    }
    if (write(reply[1], &worked, sizeof worked) != (ssize_t)sizeof worked) _exit(1);
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
  double worked = 0;
  if (read(reply[0], &worked, sizeof worked) != (ssize_t)sizeof worked) { fprintf(stderr, "ipc_floor: no total\n"); return 71; }
  waitpid(child, NULL, 0);
  getrusage(RUSAGE_SELF, &after);
  getrusage(RUSAGE_CHILDREN, &children);
  const double parent = cpu_us(&after) - cpu_us(&before), kid = cpu_us(&children) - worked;
  printf("ipc_cpu_us_per_round_trip=%.1f parent_us=%.1f child_us=%.1f\n", (parent + kid) / trips, parent / trips,
         kid / trips);
  return 0;
}
