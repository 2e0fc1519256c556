/* A TCP or unix stream with optional TLS that hands plaintext up and takes
 * plaintext down: under the HTTP client and server, the dialer and the HTTP/2
 * connection driver (reactor/h2conn.h). Embedded in a server connection, a
 * client call or a dialer; its owner closes it and frees it in the close
 * callback. */
#ifndef NL_REACTOR_IO_H
#define NL_REACTOR_IO_H

#include <stdbool.h>
#include <uv.h>

#include "reactor/error.h"
#include "reactor/tls.h"

typedef struct nl_io nl_io_t;

typedef struct nl_io_cbs {
  /* The TLS handshake completed (not called for plain TCP). */
  void (*on_ready)(nl_io_t *io);
  /* Plaintext from the peer. */
  void (*on_data)(nl_io_t *io, const char *p, size_t n);
  /* The peer closed (err NULL) or the stream failed (err borrowed). Reading has
   * stopped. Called at most once. */
  void (*on_end)(nl_io_t *io, nl_err_t *err);
  /* The write queue emptied after a write (optional). */
  void (*on_drain)(nl_io_t *io);
  /* The peer's first byte arrived, before TLS sees it (optional). */
  void (*on_first_byte)(nl_io_t *io);
} nl_io_cbs_t;

struct nl_io {
  union { /* .data is left to the owner */
    uv_tcp_t tcp;
    uv_pipe_t pipe; /* nl_io_init_pipe() */
  };
  nl_tls_t *tls;
  nl_tls_config_t *tls_later; /* a server's: the session is made at the first byte */
  const nl_io_cbs_t *cbs;
  bool ended, got_bytes, discard_input;
  uv_close_cb discard_cb; /* closing: dropping the peer's input */
};

int nl_io_init(nl_io_t *io, uv_loop_t *loop, const nl_io_cbs_t *cbs);
/* The same on a unix socket. */
int nl_io_init_pipe(nl_io_t *io, uv_loop_t *loop, const nl_io_cbs_t *cbs);
/* Takes ownership of tls; freed by nl_io_release(). */
void nl_io_set_tls(nl_io_t *io, nl_tls_t *tls);
/* A server connection: the TLS session (tens of KiB in mbedtls) is made from
 * cfg (referenced) when the peer's first byte arrives, so that a socket that
 * says nothing costs only its handle. */
void nl_io_set_tls_later(nl_io_t *io, nl_tls_config_t *cfg);
/* True when TLS is set and its handshake has not completed. */
bool nl_io_handshaking(const nl_io_t *io);
/* Starts reading, and for a TLS client sends the ClientHello. */
int nl_io_start(nl_io_t *io, nl_err_t **err);
/* Queues plaintext (copied). Returns 0 or -1 with *err. */
int nl_io_write(nl_io_t *io, const void *data, size_t len, nl_err_t **err);
bool nl_io_closing(const nl_io_t *io);
/* Bytes queued and not yet written to the socket. */
size_t nl_io_queued(const nl_io_t *io);
/* Stops (false) or resumes (true) reading, for back-pressure; a no-op once ended. */
void nl_io_read(nl_io_t *io, bool on);
/* Closes now; pending writes are dropped. */
void nl_io_close(nl_io_t *io, uv_close_cb cb);
/* Closes once the queued writes are out (close_notify first under TLS); with
 * discard_input, then reads and drops what the peer still sends until it
 * closes (the owner bounds the time). */
void nl_io_close_after_writes(nl_io_t *io, uv_close_cb cb, bool discard_input);
/* Frees what the io owns; call in the close callback. */
void nl_io_release(nl_io_t *io);

#endif
