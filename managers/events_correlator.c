/* upstream's EventCorrelator (client-go tools/record/events_cache.go): the
 * aggregator, the logger of what was sent, and the source+object spam filter,
 * each an LRU cache keyed by a join of the event's fields. Pure: the caller
 * passes the clock.
 *
 * A cache holds up to 4096 entries, and a join (component, host, object,
 * reason, message) is a few hundred bytes, so an entry keeps the join's digest
 * (the first 128 bits of its SHA-256, in hex) instead of the join, and the
 * aggregator the digests of the messages it has seen: an event's three entries
 * take about 800 bytes instead of 1600 (test_events.c, test_entries_are_small). */
#include "managers/events.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reactor/digest.h"
#include "reactor/xalloc.h"

#define DEFAULT_CACHE 4096
#define DEFAULT_MAX_EVENTS 10
#define DEFAULT_INTERVAL_NS (600LL * 1000000000)
#define DEFAULT_SPAM_BURST 25
#define DEFAULT_SPAM_QPS (1.0 / 300.0)
#define COMBINED "(combined from similar events): "
#define DIGEST 16 /* bytes of SHA-256 kept */

typedef struct ckey {
  char hex[2 * DIGEST + 1];
} ckey_t;

/* One cache entry; each cache uses its own part. */
typedef struct entry {
  nl_list_t link;
  ckey_t key;
  /* aggregate: the digests of the distinct messages seen, and when the last came */
  unsigned char (*messages)[DIGEST];
  size_t n_messages;
  int64_t last_ns;
  /* observed: what the last send of this event was */
  char *name;
  int32_t count;
  int64_t first_ns;
  /* spam: a token bucket */
  double tokens;
  int64_t refill_ns;
} entry_t;

static void entry_free(void *p) {
  entry_t *e = p;
  free(e->messages);
  free(e->name);
  free(e);
}

static void lru_init(nl_event_lru_t *l, size_t cap) {
  nl_map_init(&l->map);
  nl_list_init(&l->order);
  l->cap = cap;
}

static void lru_free(nl_event_lru_t *l) { nl_map_free(&l->map, entry_free); }

/* The entry for key, made when missing (evicting the least recently used). */
static entry_t *lru_get(nl_event_lru_t *l, const ckey_t *key, bool *found) {
  entry_t *e = nl_map_get(&l->map, key->hex);
  *found = e != NULL;
  if (e) {
    nl_list_remove(&e->link);
    nl_list_insert_tail(&l->order, &e->link);
    return e;
  }
  if (nl_map_size(&l->map) >= l->cap) {
    entry_t *old = nl_list_entry(l->order.next, entry_t, link);
    nl_list_remove(&old->link);
    nl_map_del(&l->map, old->key.hex);
    entry_free(old);
  }
  e = nl_xcalloc(1, sizeof *e);
  e->key = *key;
  nl_map_put(&l->map, key->hex, e);
  nl_list_insert_tail(&l->order, &e->link);
  return e;
}

static void aggregate_reset(entry_t *e) { e->n_messages = 0; }

static const char *s(const char *v) { return v ? v : ""; }

static void digest(const char *text, unsigned char out[DIGEST]) {
  unsigned char sum[32];
  nl_sha256(text, strlen(text), sum);
  memcpy(out, sum, DIGEST);
}

/* Takes join (the fields joined with nothing between them, as upstream). */
static ckey_t key_of(char *join) {
  unsigned char d[DIGEST];
  digest(join, d);
  free(join);
  ckey_t k;
  nl_hex(d, DIGEST, k.hex);
  return k;
}

static ckey_t spam_key(const nl_event_correlator_t *c, const nl_event_t *ev) {
  return key_of(nl_xasprintf("%s%s%s%s%s%s%s", c->component, c->host, s(ev->kind),
                             s(ev->obj_namespace), s(ev->obj_name), s(ev->uid),
                             s(ev->api_version)));
}

static ckey_t aggregate_key(const nl_event_correlator_t *c, const nl_event_t *ev) {
  /* EventAggregatorByReasonFunc; the reporting fields are component and host. */
  return key_of(nl_xasprintf("%s%s%s%s%s%s%s%s%s%s%s", c->component, c->host, s(ev->kind),
                             s(ev->obj_namespace), s(ev->obj_name), s(ev->uid),
                             s(ev->api_version), ev->type, ev->reason, c->component, c->host));
}

static ckey_t event_key(const nl_event_correlator_t *c, const nl_event_t *ev) {
  return key_of(nl_xasprintf("%s%s%s%s%s%s%s%s%s%s%s", c->component, c->host, s(ev->kind),
                             s(ev->obj_namespace), s(ev->obj_name), s(ev->field_path),
                             s(ev->uid), s(ev->api_version), ev->type, ev->reason, ev->message));
}

void nl_event_correlator_init(nl_event_correlator_t *c, const nl_event_correlator_opts_t *o) {
  size_t cap = o->cache_size ? o->cache_size : DEFAULT_CACHE;
  *c = (nl_event_correlator_t){
      .component = nl_xstrdup(s(o->component)),
      .host = nl_xstrdup(s(o->host)),
      .max_events = o->max_events ? o->max_events : DEFAULT_MAX_EVENTS,
      .max_interval_ns = o->max_interval_ns ? o->max_interval_ns : DEFAULT_INTERVAL_NS,
      .spam_burst = o->spam_burst ? o->spam_burst : DEFAULT_SPAM_BURST,
      .spam_qps = o->spam_qps > 0 ? o->spam_qps : DEFAULT_SPAM_QPS,
  };
  lru_init(&c->aggregate, cap);
  lru_init(&c->observed, cap);
  lru_init(&c->spam, cap);
}

void nl_event_correlator_free(nl_event_correlator_t *c) {
  lru_free(&c->aggregate);
  lru_free(&c->observed);
  lru_free(&c->spam);
  free(c->component);
  free(c->host);
}

/* EventAggregate: returns the key the logger counts under, and replaces *ev by
 * the combined event once max_events distinct messages came within the
 * interval. */
static ckey_t aggregate(nl_event_correlator_t *c, nl_event_t *ev, int64_t now_ns) {
  ckey_t akey = aggregate_key(c, ev);
  bool found;
  entry_t *e = lru_get(&c->aggregate, &akey, &found);
  if (!found || now_ns - e->last_ns > c->max_interval_ns) aggregate_reset(e);
  unsigned char seen_msg[DIGEST];
  digest(ev->message, seen_msg);
  bool seen = false;
  for (size_t i = 0; i < e->n_messages && !seen; i++)
    seen = !memcmp(e->messages[i], seen_msg, DIGEST);
  if (!seen) {
    e->messages = nl_xrealloc(e->messages, (e->n_messages + 1) * sizeof *e->messages);
    memcpy(e->messages[e->n_messages++], seen_msg, DIGEST);
  }
  e->last_ns = now_ns;
  if ((int)e->n_messages < c->max_events) return event_key(c, ev);
  /* upstream PopAny: one message leaves the set; here the oldest. */
  memmove(e->messages, e->messages + 1, --e->n_messages * sizeof *e->messages);
  char *msg = nl_xasprintf(COMBINED "%s", ev->message);
  free(ev->message);
  ev->message = msg;
  free(ev->name);
  ev->name = nl_xasprintf("%s.%llx", s(ev->obj_name), (unsigned long long)now_ns);
  ev->first_ns = ev->last_ns = now_ns;
  ev->count = 1;
  nl_event_drop_annotations(ev); /* upstream's aggregate event is made without them */
  return akey;
}

/* eventObserve: a repeat of what was sent takes its name and next count. */
static nl_event_action_t observe(nl_event_correlator_t *c, nl_event_t *ev, const ckey_t *key) {
  bool found;
  entry_t *e = lru_get(&c->observed, key, &found);
  nl_event_action_t act = NL_EVENT_CREATE;
  if (found && e->count > 0) {
    free(ev->name);
    ev->name = nl_xstrdup(e->name);
    ev->first_ns = e->first_ns;
    ev->count = e->count + 1;
    act = NL_EVENT_PATCH;
  }
  free(e->name);
  e->name = nl_xstrdup(ev->name);
  e->count = ev->count;
  e->first_ns = ev->first_ns;
  return act;
}

/* EventSourceObjectSpamFilter: true when the event is to be dropped. */
static bool spam_filtered(nl_event_correlator_t *c, const nl_event_t *ev, int64_t now_ns) {
  ckey_t key = spam_key(c, ev);
  bool found;
  entry_t *e = lru_get(&c->spam, &key, &found);
  if (!found) {
    e->tokens = c->spam_burst;
    e->refill_ns = now_ns;
  } else if (now_ns > e->refill_ns) {
    e->tokens += (double)(now_ns - e->refill_ns) / 1e9 * c->spam_qps;
    if (e->tokens > c->spam_burst) e->tokens = c->spam_burst;
    e->refill_ns = now_ns;
  }
  if (e->tokens < 1) return true;
  e->tokens -= 1;
  return false;
}

nl_event_action_t nl_event_correlate(nl_event_correlator_t *c, nl_event_t *ev, int64_t now_ns) {
  assert(ev->type && ev->reason && ev->message);
  ckey_t key = aggregate(c, ev, now_ns);
  nl_event_action_t act = observe(c, ev, &key);
  return spam_filtered(c, ev, now_ns) ? NL_EVENT_SKIP : act;
}
