/* libFuzzer target over the agent's other parsers of outside input: the
 * KubeletConfiguration file (its eviction thresholds too), resolv.conf (pod DNS), CRI container log files
 * (`nanolet cri logs` and FallbackToLogsOnError termination messages) and the
 * grpc.health.v1 answer of a gRPC probe, and the kubelet server's
 * /containerLogs: its query (PodLogOptions) and the writer over a log file,
 * and the path and query of /exec, /attach and /portForward, and
 * /proc/self/mountinfo (whether the root dir is on a shared mount), and a
 * PSI file and /proc/<pid>/cgroup (/stats/summary's system containers), and
 * the node log query of /logs/ (its query string, then log lines through its
 * filter). Byte 0 picks the parser. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <string.h>

#include "agent/cmd_cri_fmt.h"
#include "agent/crilog.h"
#include "agent/kserver_stream.h"
#include "agent/nodelog.h"
#include "agent/config.h"
#include "agent/config_fields.h"
#include "agent/startup.h"
#include "agent/stats.h"
#include "managers/eviction.h"
#include "managers/probe.h"
#include "managers/runtime.h"
#include "managers/termmsg.h"
#include "reactor/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  static int devnull = -1;
  if (devnull < 0) nl_log_set_fd(devnull = open("/dev/null", O_WRONLY)); /* unknown fields warn */
  switch (data[0] % 11) {
  case 0: {
    nl_kubelet_config_t cfg;
    nl_err_t *err = NULL;
    nl_config_defaults(&cfg);
    if (nl_config_load_bytes(&cfg, "fuzz.yaml", text, len, &err) == 0 && nl_config_validate(&cfg, &err) == 0) {
      const nl_config_map_t *m[] = {&cfg.eviction_hard, &cfg.eviction_soft, &cfg.eviction_soft_grace_period,
                                    &cfg.eviction_minimum_reclaim};
      nl_ev_config_map_t e[4];
      for (int i = 0; i < 4; i++) e[i] = (nl_ev_config_map_t){(const char *const *)m[i]->keys, m[i]->first, m[i]->n};
      nl_ev_threshold_t *t = NULL;
      size_t n;
      if (nl_ev_parse_thresholds(e[0], e[1], e[2], e[3], (data[0] & 1) != 0, &t, &n, &err) == 0) free(t);
    }
    nl_err_free(&err);
    /* The same text as a --config-dir drop-in over the result (maps merged,
     * nulls back to defaults), then /configz. */
    if (nl__config_load_bytes(&cfg, "fuzz.conf", text, len, true, &err) == 0)
      free(nl_config_to_json(&cfg));
    nl_err_free(&err);
    nl_config_free(&cfg);
    break;
  }
  case 1: {
    nl_host_dns_t dns = {0};
    nl_runtime_parse_resolv_conf(text, len, &dns);
    nl_host_dns_free(&dns);
    break;
  }
  case 2:
    free(nl_termmsg_tail_cri_log(text, len, NL_TERMMSG_MAX_LOG_LINES, NL_TERMMSG_MAX_LOG_BYTES));
    break;
  case 3: {
    nl_cmd_cri_log_line_t *lines = NULL;
    size_t n = nl_cmd_cri__log_parse(text, len, &lines, 0);
    nl_cmd_cri__log_free(lines, n);
    break;
  }
  case 4: {
    int status = 0;
    nl_probe_grpc_decode_response((const uint8_t *)text, len, &status);
    break;
  }
  case 5: { /* a log file through the writer; the first byte picks options */
    if (len < 1) break;
    nl_crilog_opts_t o = {.tail_lines = -1, .limit_bytes = -1};
    o.timestamps = text[0] & 1;
    if (text[0] & 2) o.limit_bytes = (text[0] >> 2) + 1;
    if (text[0] & 0x80) o.since_ns = 1700000000000000000LL;
    nl_crilog_writer_t w;
    nl_crilog_writer_init(&w, &o);
    nl_buf_t out = NL_BUF_INIT;
    const char *p = text + 1, *end = text + len;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
      if (!nl_crilog_write(&w, p, n, &out)) break;
      p += n + 1;
    }
    nl_buf_free(&out);
    break;
  }
  case 6: { /* a /containerLogs query */
    char *q = strndup(text, len);
    nl_crilog_opts_t o;
    nl_crilog_opts_parse(q, 1700000000000000000LL, &o);
    free(q);
    break;
  }
  case 7: { /* /exec etc.: a kind byte, then the path after the prefix, '?', the query */
    if (len < 1) break;
    char *t = strndup(text + 1, len - 1), *q = strchr(t, '?'), *msg = NULL;
    if (q) *q++ = 0;
    nl_stream_params_t p;
    if (nl_stream_params_parse(&p, (nl_stream_kind_t)(text[0] % 3), t, q ? q : "", text[0] & 4,
                               &msg) == 0)
      nl_stream_params_free(&p);
    free(msg);
    free(t);
    break;
  }
  case 8: {
    char *t = strndup(text, len);
    (void)nl_startup_path_shared(t, "/var/lib/kubelet");
    (void)nl_startup_path_shared(t, "/");
    free(t);
    break;
  }
  case 9: { /* a pressure file and a /proc/<pid>/cgroup (/stats/summary) */
    char *t = strndup(text, len), out[64];
    nl_psi_t p;
    nl_stats_parse_psi(&p, t);
    (void)nl_stats_parse_proc_cgroup(t, "memory", out, sizeof out);
    (void)nl_stats_parse_proc_cgroup(t, "", out, sizeof out);
    free(t);
    break;
  }
  case 10: { /* /logs/: the query string up to the first newline, then log lines */
    const char *nl = memchr(text, '\n', len);
    size_t qlen = nl ? (size_t)(nl - text) : len;
    char *q = strndup(text, qlen), *msg = NULL;
    nl_nodelog_query_t nq;
    if (nl_nodelog_query_parse(q, &nq, &msg) == 0) {
      char *cand[NL_NODELOG_MAX_CANDIDATES];
      for (size_t i = 0; i < nq.n_services; i++) {
        size_t n = nl_nodelog_candidates(nq.services[i], "nanolet.log", cand);
        for (size_t j = 0; j < n; j++) free(cand[j]);
      }
      nl_nodelog_filter_t f;
      nl_nodelog_filter_init(&f, &nq, 1700000000000000000LL, 1690000000000000000LL);
      const char *p = nl ? nl + 1 : text + len, *end = text + len;
      while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t n = e ? (size_t)(e - p) : (size_t)(end - p);
        (void)nl_nodelog_filter_line(&f, p, n);
        p += n + 1;
      }
      nl_nodelog_query_free(&nq);
    }
    free(msg);
    free(q);
    break;
  }
  }
  return 0;
}
