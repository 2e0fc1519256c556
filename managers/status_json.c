/* JSON for v1 PodStatus and PodList, byte-compatible with Go's encoding/json of
 * the k8s.io/api types for what nanolet fills in: struct field order, omitempty,
 * metav1.Time as RFC 3339 seconds (null when zero and not omitted), and Go's
 * string escaping (<, >, & and U+2028/U+2029 as \u escapes). */
#include <string.h>
#include <time.h>

#include "managers/status.h"

char *nl_status_format_time(int64_t secs, char *buf, size_t len) {
  time_t t = (time_t)secs;
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/* Length of the valid UTF-8 sequence at p (Go's utf8.DecodeRune), 0 when the
 * byte starts none. */
static size_t utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  if (c < 0xc2) return 0;
  if (c < 0xe0) return (p[1] & 0xc0) == 0x80 ? 2 : 0;
  if (c < 0xf0) { /* no overlong forms, no surrogates */
    unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
  }
  if (c < 0xf5) {
    unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80 ? 4 : 0;
  }
  return 0;
}

/* A JSON string as Go's encoding/json writes it: each byte of invalid UTF-8
 * (termination messages are whatever a container wrote) becomes \ufffd. */
static void str(nl_buf_t *b, const char *s) {
  static const char hex[] = "0123456789abcdef";
  nl_buf_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    unsigned char c = *p;
    switch (c) {
    case '"': nl_buf_puts(b, "\\\""); continue;
    case '\\': nl_buf_puts(b, "\\\\"); continue;
    case '\n': nl_buf_puts(b, "\\n"); continue;
    case '\r': nl_buf_puts(b, "\\r"); continue;
    case '\t': nl_buf_puts(b, "\\t"); continue;
    default: break;
    }
    if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
      nl_buf_puts(b, e);
    } else if (c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
      nl_buf_puts(b, p[2] == 0xa8 ? "\\u2028" : "\\u2029");
      p += 2;
    } else {
      size_t n = utf8_len(p);
      if (!n) {
        nl_buf_puts(b, "\\ufffd");
        continue;
      }
      nl_buf_append(b, p, n);
      p += n - 1;
    }
  }
  nl_buf_puts(b, "\"");
}

/* ,"key":"value" when value is non-empty (omitempty). */
static void opt_str(nl_buf_t *b, const char *key, const char *v, bool *first) {
  if (!v || !*v) return;
  nl_buf_printf(b, "%s\"%s\":", *first ? "" : ",", key);
  str(b, v);
  *first = false;
}

static void time_val(nl_buf_t *b, int64_t secs) {
  if (!secs) {
    nl_buf_puts(b, "null");
    return;
  }
  char t[32];
  nl_buf_printf(b, "\"%s\"", nl_status_format_time(secs, t, sizeof(t)));
}

static void cstate(nl_buf_t *b, const nl_cstate_t *s) {
  nl_buf_puts(b, "{");
  bool first = true;
  switch (s->kind) {
  case NL_CSTATE_WAITING:
    nl_buf_puts(b, "\"waiting\":{");
    opt_str(b, "reason", s->reason, &first);
    opt_str(b, "message", s->message, &first);
    nl_buf_puts(b, "}");
    break;
  case NL_CSTATE_RUNNING:
    nl_buf_puts(b, "\"running\":{\"startedAt\":");
    time_val(b, s->started_at);
    nl_buf_puts(b, "}");
    break;
  case NL_CSTATE_TERMINATED:
    nl_buf_printf(b, "\"terminated\":{\"exitCode\":%d", (int)s->exit_code);
    first = false;
    if (s->signal) nl_buf_printf(b, ",\"signal\":%d", (int)s->signal);
    opt_str(b, "reason", s->reason, &first);
    opt_str(b, "message", s->message, &first);
    nl_buf_puts(b, ",\"startedAt\":");
    time_val(b, s->started_at);
    nl_buf_puts(b, ",\"finishedAt\":");
    time_val(b, s->finished_at);
    opt_str(b, "containerID", s->container_id, &first);
    nl_buf_puts(b, "}");
    break;
  case NL_CSTATE_NONE: break;
  }
  nl_buf_puts(b, "}");
}

/* allocatedResourcesStatus (omitempty; each resources list is always written,
 * as upstream's, which starts it empty) */
static void alloc_status(nl_buf_t *b, const nl_resource_status_t *v, size_t n) {
  if (!n) return;
  nl_buf_puts(b, ",\"allocatedResourcesStatus\":[");
  for (size_t i = 0; i < n; i++) {
    nl_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    str(b, v[i].name);
    nl_buf_puts(b, ",\"resources\":[");
    for (size_t j = 0; j < v[i].n_resources; j++) {
      nl_buf_puts(b, j ? ",{\"resourceID\":" : "{\"resourceID\":");
      str(b, v[i].resources[j].id);
      nl_buf_printf(b, ",\"health\":\"%s\"", v[i].resources[j].health);
      if (v[i].resources[j].message) {
        nl_buf_puts(b, ",\"message\":");
        str(b, v[i].resources[j].message);
      }
      nl_buf_puts(b, "}");
    }
    nl_buf_puts(b, "]}");
  }
  nl_buf_puts(b, "]");
}

char *nl_status_volume_mounts_json(const nl_container_t *c, bool supports_rro) {
  if (!c->n_volume_mounts) return NULL;
  nl_buf_t b = {0};
  nl_buf_puts(&b, "[");
  for (size_t i = 0; i < c->n_volume_mounts; i++) {
    const nl_volume_mount_t *m = &c->volume_mounts[i];
    nl_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
    str(&b, m->name);
    nl_buf_puts(&b, ",\"mountPath\":");
    str(&b, m->mount_path);
    if (m->read_only) {
      bool rro = false;
      nl_err_t *err = NULL;
      if (nl_volume_mount_rro(m, supports_rro, &rro, &err) < 0) nl_err_free(&err);
      nl_buf_printf(&b, ",\"readOnly\":true,\"recursiveReadOnly\":\"%s\"",
                    rro ? "Enabled" : "Disabled");
    }
    nl_buf_puts(&b, "}");
  }
  nl_buf_puts(&b, "]");
  return nl_buf_steal(&b);
}

/* user (omitempty): {"linux":{"uid","gid","supplementalGroups" (omitempty)}} */
static void user(nl_buf_t *b, const nl_rt_user_t *u) {
  if (!u->present) return;
  nl_buf_puts(b, ",\"user\":{");
  if (u->linux) {
    nl_buf_printf(b, "\"linux\":{\"uid\":%lld,\"gid\":%lld", (long long)u->uid, (long long)u->gid);
    if (u->n_groups) {
      nl_buf_puts(b, ",\"supplementalGroups\":[");
      for (size_t i = 0; i < u->n_groups; i++)
        nl_buf_printf(b, "%s%lld", i ? "," : "", (long long)u->groups[i]);
      nl_buf_puts(b, "]");
    }
    nl_buf_puts(b, "}");
  }
  nl_buf_puts(b, "}");
}

static void cstatus(nl_buf_t *b, const nl_container_status_t *c) {
  nl_buf_puts(b, "{\"name\":");
  str(b, c->name);
  nl_buf_puts(b, ",\"state\":");
  cstate(b, &c->state);
  nl_buf_puts(b, ",\"lastState\":");
  cstate(b, &c->last_state);
  nl_buf_printf(b, ",\"ready\":%s,\"restartCount\":%d,\"image\":", c->ready ? "true" : "false",
                (int)c->restart_count);
  str(b, c->image);
  nl_buf_puts(b, ",\"imageID\":");
  str(b, c->image_id);
  bool first = false;
  opt_str(b, "containerID", c->container_id, &first);
  if (c->started >= 0) nl_buf_printf(b, ",\"started\":%s", c->started ? "true" : "false");
  if (c->allocated_json) nl_buf_printf(b, ",\"allocatedResources\":%s", c->allocated_json);
  if (c->resources_json) nl_buf_printf(b, ",\"resources\":%s", c->resources_json);
  if (c->volume_mounts_json) nl_buf_printf(b, ",\"volumeMounts\":%s", c->volume_mounts_json);
  alloc_status(b, c->alloc_status, c->n_alloc_status);
  user(b, &c->user);
  nl_buf_puts(b, "}");
}

static void cstatuses(nl_buf_t *b, const char *key, const nl_container_status_t *v, size_t n) {
  if (!n) return;
  nl_buf_printf(b, ",\"%s\":[", key);
  for (size_t i = 0; i < n; i++) {
    if (i) nl_buf_puts(b, ",");
    cstatus(b, &v[i]);
  }
  nl_buf_puts(b, "]");
}

static void ip_list(nl_buf_t *b, const char *key, char *const *ips, size_t n) {
  if (!n) return;
  nl_buf_printf(b, ",\"%s\":[", key);
  for (size_t i = 0; i < n; i++) {
    nl_buf_puts(b, i ? ",{\"ip\":" : "{\"ip\":");
    str(b, ips[i]);
    nl_buf_puts(b, "}");
  }
  nl_buf_puts(b, "]");
}

void nl_pod_status_encode_json(const nl_pod_status_t *s, nl_buf_t *b) {
  nl_buf_puts(b, "{");
  if (s->observed_generation) nl_buf_printf(b, "\"observedGeneration\":%lld,", (long long)s->observed_generation);
  nl_buf_puts(b, "\"phase\":");
  str(b, nl_pod_phase_name(s->phase));
  if (s->n_conditions) {
    nl_buf_puts(b, ",\"conditions\":[");
    for (size_t i = 0; i < s->n_conditions; i++) {
      const nl_pod_condition_t *c = &s->conditions[i];
      nl_buf_puts(b, i ? ",{\"type\":" : "{\"type\":");
      str(b, c->type);
      if (c->observed_generation)
        nl_buf_printf(b, ",\"observedGeneration\":%lld", (long long)c->observed_generation);
      nl_buf_puts(b, ",\"status\":");
      str(b, c->status);
      nl_buf_puts(b, ",\"lastProbeTime\":null,\"lastTransitionTime\":");
      time_val(b, c->last_transition_time);
      bool first = false;
      opt_str(b, "reason", c->reason, &first);
      opt_str(b, "message", c->message, &first);
      nl_buf_puts(b, "}");
    }
    nl_buf_puts(b, "]");
  }
  bool first = false;
  opt_str(b, "message", s->message, &first);
  opt_str(b, "reason", s->reason, &first);
  opt_str(b, "hostIP", s->host_ip, &first);
  ip_list(b, "hostIPs", s->host_ips, s->n_host_ips);
  opt_str(b, "podIP", s->pod_ip, &first);
  ip_list(b, "podIPs", s->pod_ips, s->n_pod_ips);
  if (s->start_time) {
    nl_buf_puts(b, ",\"startTime\":");
    time_val(b, s->start_time);
  }
  cstatuses(b, "initContainerStatuses", s->init_container_statuses, s->n_init_container_statuses);
  cstatuses(b, "containerStatuses", s->container_statuses, s->n_container_statuses);
  opt_str(b, "qosClass", s->qos_class, &first);
  cstatuses(b, "ephemeralContainerStatuses", s->ephemeral_container_statuses,
            s->n_ephemeral_container_statuses);
  if (s->resources_json) nl_buf_printf(b, ",\"resources\":%s", s->resources_json);
  if (s->allocated_json) nl_buf_printf(b, ",\"allocatedResources\":%s", s->allocated_json);
  nl_buf_puts(b, "}");
}

void nl_pod_list_encode_json(const nl_pod_t *const *pods, const nl_pod_status_t *const *statuses,
                             size_t n, nl_buf_t *out) {
  nl_buf_puts(out, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{},\"items\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) nl_buf_puts(out, ",");
    size_t start = out->len;
    nl_pod_encode_json(pods[i], out, 0);
    if (!statuses || !statuses[i]) continue;
    /* Re-open the pod object to append its status as the last field. */
    size_t end = out->len;
    while (end > start && (out->data[end - 1] == '\n' || out->data[end - 1] == ' ')) end--;
    if (end <= start || out->data[end - 1] != '}') continue;
    bool empty_obj = end - start >= 2 && out->data[end - 2] == '{';
    out->len = end - 1;
    out->data[out->len] = '\0';
    nl_buf_puts(out, empty_obj ? "\"status\":" : ",\"status\":");
    nl_pod_status_encode_json(statuses[i], out);
    nl_buf_puts(out, "}");
  }
  nl_buf_puts(out, "]}");
}
