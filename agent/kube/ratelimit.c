#include "agent/kube/ratelimit.h"


void nl_kube_ratelimit_init(nl_kube_ratelimit_t *rl, double qps, int burst, uint64_t now_ms) {
  rl->qps = qps;
  /* x/time/rate with burst 0 allows nothing; client-go callers always set one. */
  rl->burst = burst > 0 ? burst : 1;
  rl->tokens = rl->burst;
  rl->last_ms = now_ms;
}

bool nl_kube_ratelimit_reserve(nl_kube_ratelimit_t *rl, uint64_t now_ms, uint64_t max_wait_ms,
                               uint64_t *wait_ms) {
  *wait_ms = 0;
  if (rl->qps <= 0) return true;
  double tokens = rl->tokens;
  if (now_ms > rl->last_ms) {
    tokens += (double)(now_ms - rl->last_ms) * rl->qps / 1000.0;
    if (tokens > rl->burst) tokens = rl->burst;
  }
  tokens -= 1;
  uint64_t wait = 0;
  if (tokens < 0) { /* ceil, without libm */
    double w = -tokens * 1000.0 / rl->qps;
    wait = (uint64_t)w;
    if ((double)wait < w) wait++;
  }
  if (wait > max_wait_ms) return false;
  rl->tokens = tokens;
  if (now_ms > rl->last_ms) rl->last_ms = now_ms;
  *wait_ms = wait;
  return true;
}
