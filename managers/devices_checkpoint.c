/* The device manager's checkpoint, upstream's kubelet_internal_checkpoint
 * layout: read once at start, written on the thread pool (reactor/fs.h's
 * atomic replace) whenever assignments or registered devices change, one
 * write at a time, the latest state each time. */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mbedtls/base64.h>

#include "managers/devices_internal.h"
#include "reactor/fs.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static uint32_t fnv32a(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static json_t *checkpoint_data(const nl_devices_t *m) {
  json_t *entries = json_array();
  for (nl_list_t *p = m->allocs.next; p != &m->allocs; p = p->next) {
    const nl_dev_alloc_t *a = nl_list_entry(p, nl_dev_alloc_t, link);
    json_t *ids = json_array();
    for (size_t i = 0; i < a->n_ids; i++) json_array_append_new(ids, json_string(a->ids[i]));
    json_t *e = json_pack("{s:s, s:s, s:s, s:{s:o}}", "PodUID", a->pod_uid, "ContainerName",
                          a->container, "ResourceName", a->resource, "DeviceIDs", "-1", ids);
    if (a->resp) {
      size_t olen = 0;
      mbedtls_base64_encode(NULL, 0, &olen, a->resp, a->resp_len);
      unsigned char *b = nl_xmalloc(olen + 1);
      mbedtls_base64_encode(b, olen + 1, &olen, a->resp, a->resp_len);
      b[olen] = 0;
      json_object_set_new(e, "AllocResp", json_string((char *)b));
      free(b);
    }
    json_array_append_new(entries, e);
  }
  json_t *reg = json_object();
  nl_map_iter_t it;
  const char *key;
  void *v;
  nl_map_iter_init(&it, &m->resources);
  while (nl_map_iter_next(&it, &key, &v)) {
    const nl_dev_resource_t *r = v;
    /* As upstream, the healthy devices of plugins in use (none for a plugin
     * gone): only the names matter at the next start. */
    if (r->expired) continue;
    json_t *ids = json_array();
    for (size_t i = 0; r->ep && i < r->n_devs; i++)
      if (r->devs[i].healthy) json_array_append_new(ids, json_string(r->devs[i].id));
    json_object_set_new(reg, r->name, ids);
  }
  return json_pack("{s:o, s:o}", "PodDeviceEntries", entries, "RegisteredDevices", reg);
}

static void write_work(uv_work_t *w) {
  nl_devices_t *m = container_of(w, nl_devices_t, ckpt.work);
  m->ckpt.err = nl_fs_replace(m->checkpoint_path, m->ckpt.text, strlen(m->ckpt.text), &m->ckpt.step);
}

static void write_start(nl_devices_t *m);

static void write_done(uv_work_t *w, int status) {
  nl_devices_t *m = container_of(w, nl_devices_t, ckpt.work);
  char *why = NULL;
  if (status < 0) why = nl_xasprintf("write checkpoint %s: cancelled", m->checkpoint_path);
  else if (m->ckpt.err)
    why = nl_xasprintf("write checkpoint %s: %s: %s", m->checkpoint_path, m->ckpt.step,
                       strerror(m->ckpt.err));
  if (why) nl_error("device manager: %s", why);
  free(m->ckpt.text);
  m->ckpt.text = NULL;
  m->ckpt.busy = false;
  m->ckpt_done = m->ckpt.writing;
  if (m->ckpt_want > m->ckpt_done && m->state != NL_DEVICES_STOPPED) write_start(m);
  nl__dev_requests_checkpointed(m, why);
  free(why);
  nl__dev_unref(m); /* held by the write */
}

static void write_start(nl_devices_t *m) {
  json_t *data = checkpoint_data(m);
  char *sum_text = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
  json_t *doc = json_pack("{s:o, s:I}", "Data", data, "Checksum", (json_int_t)fnv32a(sum_text));
  free(sum_text);
  m->ckpt.text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  m->ckpt.writing = m->ckpt_want;
  m->ckpt.busy = true;
  m->open++; /* the manager stops only once the write is back */
  int r = uv_queue_work(m->loop, &m->ckpt.work, write_work, write_done);
  assert(r == 0); /* only fails for a NULL work_cb */
  (void)r;
}

uint64_t nl__dev_checkpoint_write(nl_devices_t *m) {
  if (m->state == NL_DEVICES_STOPPED) return 0;
  m->ckpt_want++;
  if (!m->ckpt.busy) write_start(m);
  return m->ckpt_want;
}

int nl__dev_checkpoint_read(nl_devices_t *m, nl_err_t **err) {
  json_error_t je;
  json_t *doc = json_load_file(m->checkpoint_path, 0, &je);
  if (!doc) {
    if (access(m->checkpoint_path, F_OK) < 0 && errno == ENOENT) return 0;
    return nl_err_set(err, NL_EINVAL, "read %s: %s", m->checkpoint_path, je.text);
  }
  json_t *data = json_object_get(doc, "Data");
  json_t *sum = json_object_get(doc, "Checksum");
  char *text = data ? json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  bool ok = text && json_is_integer(sum) && (json_int_t)fnv32a(text) == json_integer_value(sum);
  free(text);
  if (!ok) {
    json_decref(doc);
    return nl_err_set(err, NL_EINVAL, "%s: checksum mismatch or not a device checkpoint",
                      m->checkpoint_path);
  }
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(data, "PodDeviceEntries"), i, e) {
    const char *uid = json_string_value(json_object_get(e, "PodUID"));
    const char *cname = json_string_value(json_object_get(e, "ContainerName"));
    const char *res = json_string_value(json_object_get(e, "ResourceName"));
    if (!uid || !cname || !res) continue;
    nl_dev_alloc_t *a = nl__dev_alloc_find(m, uid, cname, res);
    if (!a) a = nl__dev_alloc_add(m, uid, cname, res);
    const char *numa;
    json_t *ids;
    json_object_foreach(json_object_get(e, "DeviceIDs"), numa, ids) {
      size_t j;
      json_t *id;
      json_array_foreach(ids, j, id) {
        if (json_is_string(id)) nl__dev_alloc_push(a, json_string_value(id));
      }
    }
    const char *b64 = json_string_value(json_object_get(e, "AllocResp"));
    if (b64 && *b64) {
      size_t olen = 0, n = strlen(b64);
      unsigned char *out = nl_xmalloc(n + 1);
      if (mbedtls_base64_decode(out, n + 1, &olen, (const unsigned char *)b64, n) == 0) {
        a->resp = out;
        a->resp_len = olen;
      } else {
        free(out);
      }
    }
  }
  const char *name;
  json_t *ids;
  /* As upstream's since 1.3x, a registered resource starts with no devices,
   * capacity 0 until its plugin registers again (its grace period runs):
   * the Node shows that it is a device plugin's, with nothing to give. */
  json_object_foreach(json_object_get(data, "RegisteredDevices"), name, ids) {
    (void)ids;
    if (!nl_devices_extended_name(name)) continue;
    nl_dev_resource_t *r = nl__dev_resource(m, name);
    r->ended_at = uv_now(m->loop) ? uv_now(m->loop) : 1;
  }
  json_decref(doc);
  nl_info("device manager: read %s", m->checkpoint_path);
  return 0;
}
