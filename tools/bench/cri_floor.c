/* cri_floor: the least CPU any event-loop client can spend on a unary CRI call
 * over the runtime's unix socket, to set cri_bench's figures against.
 *
 *   cri_floor [--calls N] [--inflight N] [ENDPOINT]
 *
 * It does only what a call needs from the kernel: per loop turn one epoll_wait,
 * one read and one send. No HTTP/2 library, no protobuf: the frames of
 * /runtime.v1.RuntimeService/Version {version: "v1"} are pre-encoded (HPACK
 * literals without indexing, so no table state), only the 9-byte frame headers
 * of the answer are looked at, and a call is done at its trailers (HEADERS with
 * END_STREAM). The server's PINGs and SETTINGS are acknowledged in the next
 * send, as cri/conn.c does. Client CPU is getrusage(RUSAGE_SELF) user+system
 * over the measured calls divided by their number, as in cri_bench.
 *
 * ENDPOINT defaults to NANOLET_TEST_CRI_ENDPOINT, then to the test
 * environment's containerd. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_ENDPOINT "unix:///var/lib/nanolet-testenv/run/containerd.sock"
#define PATH_VERSION "/runtime.v1.RuntimeService/Version"

enum { F_DATA = 0, F_HEADERS = 1, F_RST = 3, F_SETTINGS = 4, F_PING = 6, F_GOAWAY = 7 };
enum { FL_END_STREAM = 1, FL_ACK = 1, FL_END_HEADERS = 4 };

typedef struct out {
  uint8_t data[1 << 16];
  size_t len;
} out_t;

static void frame_head(out_t *o, uint32_t len, uint8_t type, uint8_t flags, uint32_t sid) {
  uint8_t *p = o->data + o->len;
  p[0] = (uint8_t)(len >> 16), p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)len;
  p[3] = type, p[4] = flags;
  p[5] = (uint8_t)(sid >> 24), p[6] = (uint8_t)(sid >> 16), p[7] = (uint8_t)(sid >> 8);
  p[8] = (uint8_t)sid;
  o->len += 9;
}

static void put(out_t *o, const void *d, size_t n) {
  memcpy(o->data + o->len, d, n);
  o->len += n;
}

/* HPACK literal without indexing, name from the static table (4-bit prefix). */
static void hpack_lit(uint8_t *blk, size_t *n, unsigned name_idx, const char *value) {
  size_t vl = strlen(value);
  if (name_idx < 15) {
    blk[(*n)++] = (uint8_t)name_idx;
  } else {
    blk[(*n)++] = 0x0f;
    blk[(*n)++] = (uint8_t)(name_idx - 15);
  }
  blk[(*n)++] = (uint8_t)vl; /* < 127, no Huffman */
  memcpy(blk + *n, value, vl);
  *n += vl;
}

static uint8_t hblock[128];
static size_t hblock_len;

static void build_headers(void) {
  size_t n = 0;
  hblock[n++] = 0x83; /* :method POST */
  hblock[n++] = 0x86; /* :scheme http */
  hpack_lit(hblock, &n, 4, PATH_VERSION);
  hpack_lit(hblock, &n, 1, "localhost");        /* :authority */
  hpack_lit(hblock, &n, 31, "application/grpc"); /* content-type */
  hblock[n++] = 0x00;                           /* te: trailers, new name */
  hblock[n++] = 2;
  memcpy(hblock + n, "te", 2), n += 2;
  hblock[n++] = 8;
  memcpy(hblock + n, "trailers", 8), n += 8;
  hblock_len = n;
}

static void put_call(out_t *o, uint32_t sid) {
  static const uint8_t msg[] = {0, 0, 0, 0, 4, 0x0a, 2, 'v', '1'}; /* VersionRequest */
  frame_head(o, (uint32_t)hblock_len, F_HEADERS, FL_END_HEADERS, sid);
  put(o, hblock, hblock_len);
  frame_head(o, sizeof msg, F_DATA, FL_END_STREAM, sid);
  put(o, msg, sizeof msg);
}

static double cpu_now(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int send_all(int fd, out_t *o) {
  size_t off = 0;
  while (off < o->len) {
    ssize_t n = send(fd, o->data + off, o->len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1; /* blocking socket for writes: a bench, not the agent */
    off += (size_t)n;
  }
  o->len = 0;
  return 0;
}

int main(int argc, char **argv) {
  uint64_t calls = 20000, warmup = 500;
  int inflight = 1;
  const char *endpoint = getenv("NANOLET_TEST_CRI_ENDPOINT");
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc) {
      calls = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--inflight") && i + 1 < argc) {
      inflight = atoi(argv[++i]);
    } else if (argv[i][0] != '-') {
      endpoint = argv[i];
    } else {
      fprintf(stderr, "usage: cri_floor [--calls N] [--inflight N] [ENDPOINT]\n");
      return 2;
    }
  }
  if (!endpoint) endpoint = DEFAULT_ENDPOINT;
  const char *path = strncmp(endpoint, "unix://", 7) ? endpoint : endpoint + 7;
  if (inflight < 1 || calls < 1) {
    fprintf(stderr, "cri_floor: --calls and --inflight must be positive\n");
    return 2;
  }

  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    fprintf(stderr, "cri_floor: connect %s: %s\n", path, strerror(errno));
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);

  static out_t o;
  build_headers();
  put(&o, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
  /* SETTINGS: INITIAL_WINDOW_SIZE 2^31-1; then open the connection window. */
  static const uint8_t settings[] = {0, 4, 0x7f, 0xff, 0xff, 0xff};
  frame_head(&o, sizeof settings, F_SETTINGS, 0, 0);
  put(&o, settings, sizeof settings);
  uint32_t inc = 0x7fffffffu - 65535u;
  uint8_t wu[4] = {(uint8_t)(inc >> 24), (uint8_t)(inc >> 16), (uint8_t)(inc >> 8),
                   (uint8_t)inc};
  frame_head(&o, 4, 8 /* WINDOW_UPDATE */, 0, 0);
  put(&o, wu, 4);

  uint64_t total = calls + warmup, started = 0, done = 0, data_frames = 0;
  uint32_t sid = 1;
  for (; started < (uint64_t)inflight && started < total; started++, sid += 2) put_call(&o, sid);
  if (send_all(fd, &o) < 0) {
    fprintf(stderr, "cri_floor: send: %s\n", strerror(errno));
    return 1;
  }

  static uint8_t in[1 << 16];
  size_t have = 0;
  double cpu0 = 0, wall0 = 0;
  while (done < total) {
    struct epoll_event got;
    int r = epoll_wait(ep, &got, 1, 10000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      fprintf(stderr, "cri_floor: no answer in 10 s after %llu calls\n",
              (unsigned long long)done);
      return 1;
    }
    ssize_t n = read(fd, in + have, sizeof in - have);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      fprintf(stderr, "cri_floor: read: %s\n", n == 0 ? "EOF" : strerror(errno));
      return 1;
    }
    have += (size_t)n;
    size_t off = 0;
    while (have - off >= 9) {
      const uint8_t *f = in + off;
      uint32_t len = (uint32_t)f[0] << 16 | (uint32_t)f[1] << 8 | f[2];
      if (have - off < 9 + len) break;
      uint8_t type = f[3], flags = f[4];
      if (type == F_PING && !(flags & FL_ACK)) {
        frame_head(&o, 8, F_PING, FL_ACK, 0);
        put(&o, f + 9, 8);
      } else if (type == F_SETTINGS && !(flags & FL_ACK)) {
        frame_head(&o, 0, F_SETTINGS, FL_ACK, 0);
      } else if (type == F_DATA && len > 5) {
        data_frames++;
      } else if (type == F_RST || type == F_GOAWAY) {
        fprintf(stderr, "cri_floor: server sent %s\n", type == F_RST ? "RST_STREAM" : "GOAWAY");
        return 1;
      } else if (type == F_HEADERS && (flags & FL_END_STREAM)) {
        done++;
        if (done == warmup) {
          cpu0 = cpu_now();
          wall0 = wall_now();
        }
        if (started < total) {
          put_call(&o, sid);
          sid += 2;
          started++;
        }
      }
      off += 9 + len;
    }
    memmove(in, in + off, have - off);
    have -= off;
    if (o.len && send_all(fd, &o) < 0) {
      fprintf(stderr, "cri_floor: send: %s\n", strerror(errno));
      return 1;
    }
  }
  double cpu = cpu_now() - cpu0, wall = wall_now() - wall0;
  if (data_frames < total) {
    fprintf(stderr, "cri_floor: %llu of %llu calls had no reply message\n",
            (unsigned long long)(total - data_frames), (unsigned long long)total);
    return 1;
  }
  printf("floor       Version         inflight=%-3d calls=%-6llu wall=%7.3f s  %8.0f calls/s  "
         "client CPU %6.2f us/call\n",
         inflight, (unsigned long long)calls, wall, (double)calls / wall, cpu * 1e6 / (double)calls);
  close(ep);
  close(fd);
  return 0;
}
