/* The unit tests' guarded loop: RUN_UNTIL(w, cond) runs w's loop until cond
 * holds, and fails the test after 5 s. w points to a struct with a uv_loop_t
 * loop, a uv_timer_t guard (initialised, data = w) and a bool timed_out;
 * RUN_UNTIL_GUARD(type) defines the guard's callback for that struct type. */
#ifndef NL_TEST_RUN_UNTIL_H
#define NL_TEST_RUN_UNTIL_H

#define RUN_UNTIL_GUARD(type)                  \
  static void on_guard(uv_timer_t *t) {        \
    type *w_ = t->data;                        \
    w_->timed_out = true;                      \
    uv_stop(&w_->loop);                        \
  }

#define RUN_UNTIL(w, cond)                                                \
  do {                                                                    \
    uv_timer_start(&(w)->guard, on_guard, 5000, 0);                       \
    while (!(cond) && !(w)->timed_out) uv_run(&(w)->loop, UV_RUN_ONCE);   \
    uv_timer_stop(&(w)->guard);                                           \
    assert_false((w)->timed_out);                                         \
  } while (0)

#endif
