// libFuzzer target for the agent's HTTP server: each input is the byte
// stream of one client connection (request lines, paths, query parameters,
// headers, bodies, several requests in a row), handed to the real
// HttpTransport (Beast's parser, the limits, the deadlines) serving
// the real AgentRoutes over synthetic GPUs, through a socketpair. Whatever
// arrives, the server must answer or close without a crash, a leak or
// undefined behaviour, and must keep serving the next connection.
//
//   fuzz_http -max_total_time=300 corpus/ testdata/fuzz_seeds/fuzz_http/

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "agent/agent_state.h"
#include "agent/http_routes.h"
#include "net/http_transport.h"
#include "agent/testing/synthetic_agent.h"

namespace {

using namespace gpudoctor;

// One server for the whole run, as the agent has: state and routes outlive
// the transport that calls them.
struct Server {
  Server() {
    const WallTime now = SystemClock::Instance().Now();
    auto snapshot = std::make_shared<const Snapshot>(SyntheticSnapshot(4, now));
    state.SetOpenFindings(SyntheticIncidents(*snapshot, now));
    state.PublishSnapshot(std::move(snapshot));
    state.SetStoreHealth({.ok = false, .errors_total = 1, .path = "history.db", .last_error = "disk full"});
    if (!transport.Start().ok()) std::abort();
    // Asio's per-thread state lives in statics of the server module, which
    // exit() destroys: a worker still running then finds its thread context
    // gone and crashes. Handlers registered later run first, so this one
    // joins the workers before those statics go.
    instance = this;
    std::atexit([] { instance->transport.Stop(); });
  }

  static inline Server* instance = nullptr;

  AgentState state{SystemClock::Instance().Now()};
  SyntheticHistory history{4};
  AgentRoutes routes{{.view = state, .history = &history},
                     {.bearer_token = "fuzz-token", .dcgm_compatible_metrics = true, .version = "fuzz"},
                     SystemClock::Instance()};
  HttpTransport transport{std::nullopt,
                          {.threads = 1,
                           .max_request_head_bytes = 4096,
                           .max_request_body_bytes = 256,
                           .request_timeout = std::chrono::seconds(2),
                           .response_timeout = std::chrono::seconds(2),
                           .idle_timeout = std::chrono::seconds(2)},
                          [this](const HttpRequest& request) { return routes.Handle(request); }};
};

// Reads and drops what the server sent; false once it has closed.
bool Drain(int fd) {
  char buffer[65536];
  const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
  return n > 0 || (n < 0 && errno == EAGAIN);
}

// Waits until the server has read all that was sent, or has answered. The
// event loop is edge-triggered: the end of the stream must arrive after the
// server has read the bytes before it, or the server sees no new event and
// waits out its idle timeout instead of closing at once.
void AwaitServerRead(int fd) {
  for (int waited_ms = 0; waited_ms < 5000; ++waited_ms) {
    int unread = 0;
    if (ioctl(fd, SIOCOUTQ, &unread) != 0 || unread == 0) return;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 1) != 0) return;
  }
}

// Sends the input (as much as the server reads before it answers and
// closes), ends the client's side, then reads until the server closes.
void Converse(int fd, std::string_view input) {
  while (!input.empty()) {
    const ssize_t sent = send(fd, input.data(), input.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      input.remove_prefix(static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno != EAGAIN) return;
    pollfd p{.fd = fd, .events = POLLIN | POLLOUT, .revents = 0};
    if (poll(&p, 1, 5000) <= 0 || ((p.revents & POLLIN) && !Drain(fd))) return;
  }
  AwaitServerRead(fd);
  shutdown(fd, SHUT_WR);
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  while (poll(&p, 1, 5000) > 0 && Drain(fd)) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* server = new Server;  // never destroyed: its threads stop at exit
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  // Each conversation waits for the server to close its connection, so the
  // limit is reached only if connections leak.
  if (Status added = server->transport.AddConnection(fds[0]); !added) {
    std::fprintf(stderr, "fuzz_http: %s\n", added.error().message.c_str());
    std::abort();
  }
  Converse(fds[1], std::string_view(reinterpret_cast<const char*>(data), size));
  close(fds[1]);
  return 0;
}
