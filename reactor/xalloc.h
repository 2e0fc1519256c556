/* Allocation that aborts on failure (docs/ARCHITECTURE.md: the supervisor restarts the agent,
 * which re-adopts running pods). Everything else in nanolet handles its errors. */
#ifndef NL_XALLOC_H
#define NL_XALLOC_H

#include <stddef.h>
#include <stdlib.h>

void *nl_xmalloc(size_t n);
void *nl_xcalloc(size_t count, size_t n);
void *nl_xrealloc(void *p, size_t n);
char *nl_xstrdup(const char *s);
char *nl_xstrndup(const char *s, size_t n);
/* printf into a fresh allocation; the caller owns the result. */
char *nl_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Scope cleanup, as crun's cleanup_free. */
static inline void nl__freep(void *p) { free(*(void **)p); }
#define nl_cleanup_free __attribute__((cleanup(nl__freep)))

/* Hands ownership out of a cleanup-annotated local (crun's get_and_reset). */
#define nl_steal(pp) ({ __typeof__(*(pp)) nl__t = *(pp); *(pp) = NULL; nl__t; })

#ifndef container_of
#define container_of(ptr, type, member) \
  ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#endif
