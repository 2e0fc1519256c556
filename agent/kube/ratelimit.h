/* The client-side token bucket of client-go's flowcontrol.NewTokenBucketRateLimiter
 * (golang.org/x/time/rate): qps tokens a second, at most burst stored, full at
 * start. A request reserves a token and waits until the bucket's debt is paid,
 * so reservations are served in order, qps apart once the burst is spent. */
#ifndef NL_KUBE_RATELIMIT_H
#define NL_KUBE_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nl_kube_ratelimit {
  double qps;     /* <= 0: no limit */
  double burst;
  double tokens;  /* may go negative: reserved ahead */
  uint64_t last_ms;
} nl_kube_ratelimit_t;

void nl_kube_ratelimit_init(nl_kube_ratelimit_t *rl, double qps, int burst, uint64_t now_ms);
/* Reserves one token at now and returns the wait before it may be used (0: at
 * once). When that wait would pass max_wait_ms, nothing is reserved and false is
 * returned (x/time/rate's "would exceed context deadline"). */
bool nl_kube_ratelimit_reserve(nl_kube_ratelimit_t *rl, uint64_t now_ms, uint64_t max_wait_ms,
                               uint64_t *wait_ms);

#endif
