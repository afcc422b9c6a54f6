/* The least any HTTP server pays to answer a scrape on this machine: one
 * thread, one epoll set, keep-alive, and a fixed response prepared once (the
 * same bytes the agent would send). It reads until the end of the request head,
 * ignores what the request says, and writes the whole response. No parsing,
 * no routing, no limits.
 *
 *   http_floor BODY_FILE [CONTENT_ENCODING]
 * prints "listening on http://127.0.0.1:PORT/" and serves until killed. With
 * CONTENT_ENCODING ("gzip"), the response carries that Content-Encoding.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNECTIONS 65536

/* Per connection: how much of the response went out, whether the rest waits
 * for the socket to drain, and the tail of the bytes read so far, to find
 * "\r\n\r\n" across reads. */
struct connection {
  size_t written;
  int waiting_to_write;
  char tail[3];
  size_t tail_length;
};

static struct connection connections[MAX_CONNECTIONS];
static char* response;
static size_t response_length;

static char* read_file(const char* path, size_t* length) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t capacity = 1 << 16, used = 0;
  char* data = malloc(capacity);
  size_t n;
  while ((n = fread(data + used, 1, capacity - used, f)) > 0) {
    used += n;
    if (used == capacity) data = realloc(data, capacity *= 2);
  }
  fclose(f);
  *length = used;
  return data;
}

/* Scans `data` for the end of a request head, carrying the last three bytes
 * of the previous read in `c->tail`. Returns 1 when found. */
static int head_complete(struct connection* c, const char* data, size_t length) {
  char window[4];
  size_t filled = c->tail_length;
  memcpy(window, c->tail, filled);
  for (size_t i = 0; i < length; ++i) {
    if (filled == 4) {
      memmove(window, window + 1, 3);
      filled = 3;
    }
    window[filled++] = data[i];
    if (filled == 4 && memcmp(window, "\r\n\r\n", 4) == 0) {
      c->tail_length = 0;
      return 1;
    }
  }
  c->tail_length = filled < 3 ? filled : 3;
  memcpy(c->tail, window + filled - c->tail_length, c->tail_length);
  return 0;
}

static void close_connection(int epoll_fd, int fd) {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
}

/* Writes what the socket takes; switches to waiting for writability when full.
 * Returns 0 when the connection failed and was closed. */
static int write_response(int epoll_fd, int fd) {
  struct connection* c = &connections[fd];
  while (c->written < response_length) {
    ssize_t n = send(fd, response + c->written, response_length - c->written, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN) {
        if (!c->waiting_to_write) {
          c->waiting_to_write = 1;
          struct epoll_event event = {.events = EPOLLOUT, .data.fd = fd};
          epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &event);
        }
        return 1;
      }
      close_connection(epoll_fd, fd);
      return 0;
    }
    c->written += (size_t)n;
  }
  if (c->waiting_to_write) {
    c->waiting_to_write = 0;
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, fd, &event);
  }
  return 1;
}

static void read_requests(int epoll_fd, int fd) {
  struct connection* c = &connections[fd];
  char buffer[16384];
  for (;;) {
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
      close_connection(epoll_fd, fd);
      return;
    }
    if (n < 0) return;
    /* A pipelined second request in the same read is answered once; wrk
     * does not pipeline. */
    if (head_complete(c, buffer, (size_t)n)) {
      c->written = 0;
      if (!write_response(epoll_fd, fd) || c->waiting_to_write) return; /* the rest goes out when the socket drains */
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: http_floor BODY_FILE [CONTENT_ENCODING]\n");
    return 64;
  }
  size_t body_length;
  char* body = read_file(argv[1], &body_length);
  if (!body) {
    fprintf(stderr, "http_floor: cannot read %s\n", argv[1]);
    return 66;
  }
  char head[256];
  int head_length = snprintf(head, sizeof head,
                             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                             "%s%s%sContent-Length: %zu\r\n\r\n",
                             argc == 3 ? "Content-Encoding: " : "", argc == 3 ? argv[2] : "",
                             argc == 3 ? "\r\n" : "", body_length);
  response_length = (size_t)head_length + body_length;
  response = malloc(response_length);
  memcpy(response, head, (size_t)head_length);
  memcpy(response + head_length, body, body_length);

  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int yes = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t address_length = sizeof address;
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0 || listen(listener, 4096) != 0) {
    perror("http_floor: bind");
    return 69;
  }
  getsockname(listener, (struct sockaddr*)&address, &address_length);
  printf("listening on http://127.0.0.1:%d/\n", ntohs(address.sin_port));
  fflush(stdout);

  int epoll_fd = epoll_create1(0);
  struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event);
  struct epoll_event events[256];
  for (;;) {
    int ready = epoll_wait(epoll_fd, events, 256, -1);
    for (int i = 0; i < ready; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener) {
        int client;
        while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          if (client >= MAX_CONNECTIONS) {
            close(client);
            continue;
          }
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
          memset(&connections[client], 0, sizeof connections[client]);
          struct epoll_event client_event = {.events = EPOLLIN, .data.fd = client};
          epoll_ctl(epoll_fd, EPOLL_CTL_ADD, client, &client_event);
        }
      } else if (connections[fd].waiting_to_write) {
        write_response(epoll_fd, fd);
      } else {
        read_requests(epoll_fd, fd);
      }
    }
  }
}
