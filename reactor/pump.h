/* Copies bytes both ways between two ends with back-pressure: the byte proxy
 * behind the kubelet's /exec, /attach and /portForward once both sides have
 * switched protocols.
 *
 * The pump itself does no I/O (as the protocol engines): an end is anything
 * that can queue bytes, say how many it still holds, and pause its reading --
 * a plain uv stream (nl_pump_stream_t below) or a server connection under TLS
 * (which implements the ops itself). Ends report what they read with
 * nl_pump_end_data(), the end of their input with nl_pump_end_eof(), and a
 * finished write with nl_pump_end_drained().
 *
 * Back-pressure: when the bytes queued on one end pass high_water, the pump
 * stops reading the other end; it resumes once the queue is down to half of
 * high_water. So a slow reader holds at most high_water plus one read's worth
 * (64 KiB with libuv) of the other side's bytes.
 *
 * The copy ends, as upstream's upgrade-aware proxy ends, when either side
 * ends: done runs once, with the side whose input ended (0 or 1) and err NULL
 * for a clean EOF or the failure (borrowed). The owner then closes both ends
 * (letting queued writes go out first). */
#ifndef NL_PUMP_H
#define NL_PUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "reactor/error.h"

typedef struct nl_pump nl_pump_t;
typedef struct nl_pump_end nl_pump_end_t;

typedef struct nl_pump_end_ops {
  /* Queues n bytes (copied) for the peer of this end. Returns 0, or -1 with *err. */
  int (*write)(nl_pump_end_t *e, const char *p, size_t n, nl_err_t **err);
  /* Bytes accepted by write and not yet handed to the kernel. */
  size_t (*queued)(const nl_pump_end_t *e);
  /* Stops or resumes reading (and so calls of nl_pump_end_data). */
  void (*set_reading)(nl_pump_end_t *e, bool on);
} nl_pump_end_ops_t;

/* The first member of the end's own struct. */
struct nl_pump_end {
  const nl_pump_end_ops_t *ops;
  nl_pump_t *pump; /* set by nl_pump_init */
  bool reading;
};

typedef void (*nl_pump_done_fn)(nl_pump_t *p, int side, nl_err_t *err, void *ctx);

struct nl_pump {
  nl_pump_end_t *end[2];
  size_t high_water;
  uint64_t copied[2];   /* bytes read from end[i] and queued on the other */
  size_t max_queued[2]; /* the largest queue seen on end[i] (for tests and logs) */
  nl_pump_done_fn done_cb;
  void *done_ctx;
  bool started, done;
};

#define NL_PUMP_DEFAULT_HIGH_WATER (256 * 1024)

/* high_water 0: NL_PUMP_DEFAULT_HIGH_WATER. Ends stay the caller's. */
void nl_pump_init(nl_pump_t *p, nl_pump_end_t *a, nl_pump_end_t *b, size_t high_water,
                  nl_pump_done_fn done, void *ctx);
/* Starts reading both ends. */
void nl_pump_start(nl_pump_t *p);
/* Stops reading both ends without calling done (the owner is closing). */
void nl_pump_stop(nl_pump_t *p);

/* For ends: bytes read (borrowed for the call), the end of input (err NULL
 * when clean, otherwise borrowed), a completed write. Calls after done are
 * ignored. */
void nl_pump_end_data(nl_pump_end_t *e, const char *p, size_t n);
void nl_pump_end_eof(nl_pump_end_t *e, nl_err_t *err);
void nl_pump_end_drained(nl_pump_end_t *e);

/* ---- an end on a plain uv stream ------------------------------------------ */

/* Owns nothing but its write requests; the stream is the caller's (opened,
 * connected; init takes stream->data) and must outlive the pump. Close the
 * stream after nl_pump_stop or done; pending write requests complete (with
 * UV_ECANCELED) before the close callback, which is when the pump and this end
 * may be freed. */
typedef struct nl_pump_stream {
  nl_pump_end_t end;
  uv_stream_t *stream;
  size_t queued;
} nl_pump_stream_t;

void nl_pump_stream_init(nl_pump_stream_t *s, uv_stream_t *stream);

#endif
