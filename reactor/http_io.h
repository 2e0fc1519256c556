/* Internal to the HTTP client and server and the dialer: a TCP or unix stream
 * with optional TLS that
 * hands plaintext up and takes plaintext down. Embedded in a server connection
 * or a client call; its owner closes it and frees it in the close callback. */
#ifndef NL_HTTP_IO_H
#define NL_HTTP_IO_H

#include <stdbool.h>
#include <uv.h>

#include "reactor/error.h"
#include "reactor/tls.h"

typedef struct nl__http_io nl__http_io_t;

typedef struct nl__http_io_cbs {
  /* The TLS handshake completed (not called for plain TCP). */
  void (*on_ready)(nl__http_io_t *io);
  /* Plaintext from the peer. */
  void (*on_data)(nl__http_io_t *io, const char *p, size_t n);
  /* The peer closed (err NULL) or the stream failed (err borrowed). Reading has
   * stopped. Called at most once. */
  void (*on_end)(nl__http_io_t *io, nl_err_t *err);
  /* The write queue emptied after a write (optional). */
  void (*on_drain)(nl__http_io_t *io);
} nl__http_io_cbs_t;

struct nl__http_io {
  union { /* .data is left to the owner */
    uv_tcp_t tcp;
    uv_pipe_t pipe; /* nl__http_io_init_pipe() */
  };
  nl_tls_t *tls;
  const nl__http_io_cbs_t *cbs;
  bool ended;
};

int nl__http_io_init(nl__http_io_t *io, uv_loop_t *loop, const nl__http_io_cbs_t *cbs);
/* The same on a unix socket. */
int nl__http_io_init_pipe(nl__http_io_t *io, uv_loop_t *loop, const nl__http_io_cbs_t *cbs);
/* Takes ownership of tls; freed by nl__http_io_release(). */
void nl__http_io_set_tls(nl__http_io_t *io, nl_tls_t *tls);
/* Starts reading, and for a TLS client sends the ClientHello. */
int nl__http_io_start(nl__http_io_t *io, nl_err_t **err);
/* Queues plaintext (copied). Returns 0 or -1 with *err. */
int nl__http_io_write(nl__http_io_t *io, const void *data, size_t len, nl_err_t **err);
bool nl__http_io_closing(const nl__http_io_t *io);
/* Bytes queued and not yet written to the socket. */
size_t nl__http_io_queued(const nl__http_io_t *io);
/* Stops (false) or resumes (true) reading, for back-pressure; a no-op once ended. */
void nl__http_io_read(nl__http_io_t *io, bool on);
/* Closes now; pending writes are dropped. */
void nl__http_io_close(nl__http_io_t *io, uv_close_cb cb);
/* Closes once the queued writes are out (close_notify first under TLS). */
void nl__http_io_close_after_writes(nl__http_io_t *io, uv_close_cb cb);
/* Frees what the io owns; call in the close callback. */
void nl__http_io_release(nl__http_io_t *io);

#endif
