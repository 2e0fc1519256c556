/* An intrusive doubly linked list (as libuv's queue.h): embed nl_list_t in the
 * element and find it again with container_of. An empty list points to itself. */
#ifndef NL_LIST_H
#define NL_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nl_list {
  struct nl_list *prev, *next;
} nl_list_t;

static inline void nl_list_init(nl_list_t *l) { l->prev = l->next = l; }
static inline bool nl_list_empty(const nl_list_t *l) { return l->next == l; }

static inline void nl_list_insert_tail(nl_list_t *head, nl_list_t *e) {
  e->prev = head->prev;
  e->next = head;
  head->prev->next = e;
  head->prev = e;
}

static inline void nl_list_remove(nl_list_t *e) {
  e->prev->next = e->next;
  e->next->prev = e->prev;
  e->prev = e->next = e;
}

#define nl_list_entry(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* Safe against removal of the current element. */
#define nl_list_foreach_safe(pos, tmp, head) \
  for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); (pos) = (tmp), (tmp) = (pos)->next)

#endif
