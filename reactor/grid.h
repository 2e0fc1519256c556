/* Timers on a shared grid. A node's periodic work (each probe every period,
 * the relist every second) started at scattered times wakes the agent once
 * for each of them; due at the same instants, libuv runs them all in one
 * wake-up (uv__run_timers takes every timer due by the loop's time) and the
 * calls they start leave in one write (reactor/h2conn.c: one write per loop
 * turn). nl_grid_delay gives the delay to arm a one-shot timer with so that
 * it is due on the grid, as near as it can be to the wanted delay: within
 * grid/2 of it. Re-armed so at each run (not with libuv's repeat, which counts
 * from the run's time and so drifts off the grid), a period stays a period on
 * average, and timers of the same grid stay together. */
#ifndef NL_GRID_H
#define NL_GRID_H

#include <stdint.h>

/* The agent's grid: its whole seconds. */
#define NL_GRID_MS 1000

/* now: the loop's time (uv_now), ms. delay 0 (at once), or a grid of 0 or
 * longer than twice the delay, is left as it is. */
static inline uint64_t nl_grid_delay(uint64_t now, uint64_t delay, uint64_t grid) {
  if (!delay || !grid || delay < grid / 2) return delay;
  uint64_t due = (now + delay + grid / 2) / grid * grid;
  return due > now ? due - now : 0;
}

#endif
