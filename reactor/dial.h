/* One way to open a connection on the loop: a unix socket, or TCP to a host
 * name or address (resolved with uv_getaddrinfo, never blocking the loop;
 * each address in turn until one answers), with TLS through reactor/tls.c
 * when asked (SNI, verification and ALPN from the TLS configuration), under
 * one deadline for all of it. The API client, the URL source and the HTTP
 * probes dial with it (through reactor/http_client.c), and so does the CRI
 * client's unix socket (raw: it reads and writes the stream itself).
 *
 * The owner embeds an nl_dial_t and gives it the io callbacks it wants once
 * connected (data, end, drain; found again with container_of on d->io): the
 * dialer reports the outcome once through on_connect, then steps aside.
 * Errors read like Go's net.Dial ones:
 *   dial tcp 127.0.0.1:1: connect: connection refused
 *   dial tcp: lookup nowhere.invalid: no such host
 *   dial tcp 10.0.0.1:443: i/o timeout
 *   dial unix /run/x.sock: connect: no such file or directory
 * Codes: the errno value, EHOSTUNREACH for a failed lookup, NL_ETIMEOUT for
 * the deadline, EPROTO for a TLS failure.
 *
 * Handles: the stream (d->io), a timer and the lookup; nl_dial_close() closes
 * what is open and calls back once all of it is, from a close callback. */
#ifndef NL_REACTOR_DIAL_H
#define NL_REACTOR_DIAL_H

#include <netdb.h>
#include <sys/un.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/error.h"
#include "reactor/io.h"
#include "reactor/tls.h"

typedef struct nl_dial nl_dial_t;

/* The dial ended: err NULL when connected (with TLS: after the handshake;
 * nl_tls_alpn(d->io.tls) says what was agreed), else why it failed
 * (borrowed). Called once, never from inside nl_dial_start(). The owner then
 * uses d->io, or closes the dialer. */
typedef void (*nl_dial_cb)(nl_dial_t *d, const nl_err_t *err);

typedef struct nl_dial_opts {
  const char *unix_path; /* a unix socket; else host and port */
  const char *host;      /* a name or an address (IPv6 without brackets) */
  int port;
  uint64_t timeout_ms;   /* lookup + connect + TLS handshake; 0: none */
  nl_tls_config_t *tls;  /* a client configuration: TLS on top (referenced while
                            dialing); NULL: plaintext */
  const char *server_name; /* SNI and the name verified; NULL: host */
  /* Once connected: plaintext from the peer, its end, the write queue
   * draining (on_ready is not used: on_connect says it). Required unless raw. */
  const nl_io_cbs_t *io_cbs;
  /* Connect only (no TLS): the owner reads and writes d->io's stream
   * (d->io.pipe, d->io.tcp) with its own buffers, as the CRI client does. */
  bool raw;
} nl_dial_opts_t;

struct nl_dial {
  nl_io_t io;  /* the connection; d->io.tcp.data is the dialer's */
  void *data;        /* the owner's */
  /* private */
  uv_loop_t *loop;
  uv_getaddrinfo_t gai;
  uv_connect_t connect;
  uv_timer_t timer;
  struct addrinfo *ai, *ai_next;
  char *host, *unix_path, *server_name;
  int port;
  nl_tls_config_t *tls;
  const nl_io_cbs_t *io_cbs;
  bool raw;
  nl_dial_cb cb;
  void (*closed)(nl_dial_t *d);
  nl_err_t *later;   /* a failure found while starting, reported from the timer */
  int live;          /* handles and requests still to come back */
  bool gai_pending, io_open, done, closing;
  /* "[ip]:port", or the socket path (up to sun_path's 108 bytes), as Go prints it */
  char peer[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
};

/* Starts dialing. Everything in opts is copied. Errors, a bad option
 * included, arrive through cb. */
void nl_dial_start(nl_dial_t *d, uv_loop_t *loop, const nl_dial_opts_t *opts, nl_dial_cb cb);
/* Stops dialing (no on_connect follows) or closes the connection; closed(d)
 * runs once every handle is closed, from a close callback, and the owner may
 * free d from there. */
typedef void (*nl_dial_closed_cb)(nl_dial_t *d);
void nl_dial_close(nl_dial_t *d, nl_dial_closed_cb closed);
/* The error an io on_end reports once connected, worded as Go's:
 * "read tcp 127.0.0.1:6443: connection reset by peer", or err's message
 * (TLS alerts). Returns an owned error, or NULL for NULL err (the peer
 * closed: the owner words its EOF). */
nl_err_t *nl_dial_io_error(const nl_dial_t *d, const nl_err_t *err);

#endif
