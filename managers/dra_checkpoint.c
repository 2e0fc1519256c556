/* The DRA manager's checkpoint, <root-dir>/dra_manager_state: upstream's
 * layout ({"Data": "<JSON text>", "Checksum": CRC-32 (IEEE) of that text},
 * the text a DRACheckpoint of checkpoint.dra.kubelet.k8s.io/v1 with its
 * ClaimInfoStateList), plus "Prepared" on each claim: upstream keeps that in
 * memory only and prepares every claim again after a restart. Written on the
 * thread pool with a temporary file, fsync and rename, one write at a time and
 * always the latest state; read at start. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "managers/dra_internal.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

#define KIND "DRACheckpoint"
#define API_VERSION "checkpoint.dra.kubelet.k8s.io/v1"

static uint32_t crc32_ieee(const char *s, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= (unsigned char)s[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

static json_t *strv_json(char *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(v[i]));
  return a;
}

static json_t *state_json(const nl_dra_t *m) {
  json_t *list = json_array();
  nl_list_t *pos, *tmp;
  nl_list_foreach_safe(pos, tmp, &((nl_dra_t *)m)->claims) {
    const nl_dra_claim_t *c = nl_list_entry(pos, nl_dra_claim_t, link);
    json_t *pods = json_object();
    for (size_t i = 0; i < c->n_pods; i++) json_object_set_new(pods, c->pods[i], json_object());
    json_t *drivers = json_object();
    for (size_t i = 0; i < c->n_drivers; i++) {
      json_t *devs = json_array();
      for (size_t d = 0; d < c->n_devs; d++) {
        const nl_dra_device_t *dv = &c->devs[d];
        if (strcmp(dv->driver, c->drivers[i]) != 0) continue;
        json_t *o = json_pack("{s:s, s:s, s:o, s:o}", "PoolName", dv->pool, "DeviceName",
                              dv->device, "RequestNames", strv_json(dv->requests, dv->n_requests),
                              "CDIDeviceIDs", strv_json(dv->cdi, dv->n_cdi));
        json_object_set_new(o, "ShareID", dv->share_id ? json_string(dv->share_id) : json_null());
        json_array_append_new(devs, o);
      }
      json_object_set_new(drivers, c->drivers[i], json_pack("{s:o}", "Devices", devs));
    }
    json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o, s:o, s:b}", "ClaimUID", c->uid,
                                          "ClaimName", c->name, "Namespace", c->ns, "PodUIDs",
                                          pods, "DriverState", drivers, "Prepared", c->prepared));
  }
  return json_pack("{s:s, s:s, s:o}", "kind", KIND, "apiVersion", API_VERSION,
                   "ClaimInfoStateList", list);
}

static void write_work(uv_work_t *w) {
  nl_dra_t *m = container_of(w, nl_dra_t, ckpt.work);
  m->ckpt.err = nl_fs_replace(m->opts.state_path, m->ckpt.text, strlen(m->ckpt.text), &m->ckpt.step);
}

static void write_start(nl_dra_t *m);

static void write_done(uv_work_t *w, int status) {
  nl_dra_t *m = container_of(w, nl_dra_t, ckpt.work);
  m->ckpt.busy = false;
  free(m->ckpt.text);
  m->ckpt.text = NULL;
  if (status < 0 && !m->ckpt.err) {
    m->ckpt.err = -status;
    m->ckpt.step = "queue";
  }
  if (m->ckpt.err && m->state == NL_DRA_RUNNING)
    nl_error("DRA checkpoint %s: %s: %s", m->opts.state_path, m->ckpt.step, strerror(m->ckpt.err));
  m->ckpt.done = m->ckpt.writing;
  if (m->state == NL_DRA_RUNNING) {
    if (m->ckpt.want > m->ckpt.done) write_start(m);
    nl__dra_checkpoint_written(m);
  }
  nl__dra_release(m);
}

static void write_start(nl_dra_t *m) {
  json_t *data = state_json(m);
  char *text = json_dumps(data, JSON_COMPACT);
  json_decref(data);
  json_t *doc = json_pack("{s:s, s:I}", "Data", text,
                          "Checksum", (json_int_t)crc32_ieee(text, strlen(text)));
  free(text);
  m->ckpt.text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  m->ckpt.writing = m->ckpt.want;
  m->ckpt.err = 0;
  m->ckpt.busy = true;
  m->open++;
  int r = uv_queue_work(m->loop, &m->ckpt.work, write_work, write_done);
  if (r < 0) write_done(&m->ckpt.work, r); /* answered as a failed write */
}

uint64_t nl__dra_checkpoint_write(nl_dra_t *m) {
  uint64_t gen = ++m->ckpt.want;
  if (!m->ckpt.busy) write_start(m);
  return gen;
}

static char **strv_read(json_t *a, size_t *n) {
  char **v = NULL;
  *n = 0;
  size_t i;
  json_t *s;
  json_array_foreach(a, i, s) {
    if (json_is_string(s)) nl__dra_strv_add(&v, n, json_string_value(s));
  }
  return v;
}

static const char *jstr(json_t *o, const char *k) {
  const char *s = json_string_value(json_object_get(o, k));
  return s ? s : "";
}

void nl__dra_checkpoint_read(nl_dra_t *m) {
  json_error_t je;
  json_t *doc = json_load_file(m->opts.state_path, 0, &je);
  if (!doc) {
    if (access(m->opts.state_path, F_OK) == 0)
      nl_warn("DRA checkpoint %s: %s: starting without it", m->opts.state_path, je.text);
    return;
  }
  const char *text = json_string_value(json_object_get(doc, "Data"));
  json_t *sum = json_object_get(doc, "Checksum");
  json_t *data = NULL;
  if (!text || !json_is_integer(sum) ||
      (json_int_t)crc32_ieee(text, strlen(text)) != json_integer_value(sum) ||
      !(data = json_loads(text, 0, &je)) || strcmp(jstr(data, "kind"), KIND) != 0) {
    nl_warn("DRA checkpoint %s: corrupt (checksum or layout): starting without it",
            m->opts.state_path);
    json_decref(data);
    json_decref(doc);
    return;
  }
  size_t i, n = 0;
  json_t *e;
  json_array_foreach(json_object_get(data, "ClaimInfoStateList"), i, e) {
    nl_dra_claim_t *c = nl_xcalloc(1, sizeof *c);
    c->uid = nl_xstrdup(jstr(e, "ClaimUID"));
    c->name = nl_xstrdup(jstr(e, "ClaimName"));
    c->ns = nl_xstrdup(jstr(e, "Namespace"));
    c->prepared = json_is_true(json_object_get(e, "Prepared"));
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(e, "PodUIDs"), k, v) nl__dra_strv_add(&c->pods, &c->n_pods, k);
    json_object_foreach(json_object_get(e, "DriverState"), k, v) {
      nl__dra_strv_add(&c->drivers, &c->n_drivers, k);
      size_t j;
      json_t *d;
      json_array_foreach(json_object_get(v, "Devices"), j, d) {
        c->devs = nl_xrealloc(c->devs, (c->n_devs + 1) * sizeof *c->devs);
        nl_dra_device_t *dv = &c->devs[c->n_devs++];
        *dv = (nl_dra_device_t){0};
        dv->driver = nl_xstrdup(k);
        dv->pool = nl_xstrdup(jstr(d, "PoolName"));
        dv->device = nl_xstrdup(jstr(d, "DeviceName"));
        const char *share = json_string_value(json_object_get(d, "ShareID"));
        dv->share_id = share ? nl_xstrdup(share) : NULL;
        dv->requests = strv_read(json_object_get(d, "RequestNames"), &dv->n_requests);
        dv->cdi = strv_read(json_object_get(d, "CDIDeviceIDs"), &dv->n_cdi);
      }
    }
    nl_list_insert_tail(&m->claims, &c->link);
    n++;
  }
  if (n) nl_info("DRA checkpoint: %zu claims known", n);
  json_decref(data);
  json_decref(doc);
}
