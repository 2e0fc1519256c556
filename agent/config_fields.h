/* The table of KubeletConfiguration fields and flags shared by the config file
 * decoder and the flag parser, so one field has one parser. Internal to agent/. */
#ifndef NL_CONFIG_FIELDS_H
#define NL_CONFIG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/config.h"

typedef enum {
  NL_F_STRING,
  NL_F_BOOL,
  NL_F_INT32,
  NL_F_INT64,
  NL_F_DURATION,
  NL_F_STRLIST, /* file: sequence; flag: comma separated */
  NL_F_STRMAP,  /* file: mapping of strings; flag: k=v,k2=v2 */
  NL_F_BOOLMAP, /* file: mapping of booleans; flag: k=true,k2=false (kept as
                 * "true"/"false"; shown as JSON booleans) */
  NL_F_STRLISTMAP, /* file: mapping of sequences; flag: k:v,k:v2 */
  NL_F_TAINTS,  /* file: sequence of {key, value, effect}; flag: key=value:Effect,...
                 * (kept as "key=value:Effect" strings) */
  NL_F_PRIORITIES, /* file: sequence of {priority, shutdownGracePeriodSeconds};
                    * no flag (kept as "priority=seconds" strings) */
} nl_field_type_t;

typedef struct nl_config_field {
  const char *name; /* in the file, or NULL for flag-only settings */
  const char *flag; /* without dashes, or NULL for file-only fields */
  nl_field_type_t type;
  size_t offset;
  int64_t min, max; /* for integers, when min < max */
  const char *help;
} nl_config_field_t;

extern const nl_config_field_t nl__config_fields[];
extern const size_t nl__config_nfields;

/* Parses one scalar text into the field. Returns 0 or -1 with *err saying what is
 * allowed (the caller names the field or flag). */
int nl__config_set_scalar(nl_kubelet_config_t *cfg, const nl_config_field_t *f, const char *s,
                          nl_err_t **err);
/* Reads a KubeletConfiguration document (bytes, or the file at path) into cfg:
 * a --config file over what is there (a map in it replaces the map whole), or
 * a drop-in (dropin: maps merge key by key, null resets to the default), as
 * nl_config_load_dir says. Errors as nl_config_load_bytes. */
int nl__config_load_bytes(nl_kubelet_config_t *cfg, const char *name, const char *data,
                          size_t len, bool dropin, nl_err_t **err);
int nl__config_load_path(nl_kubelet_config_t *cfg, const char *path, bool dropin,
                         nl_err_t **err);
/* Makes dst's field f a deep copy of src's. */
void nl__config_field_copy(nl_kubelet_config_t *dst, const nl_kubelet_config_t *src,
                           const nl_config_field_t *f);
/* "true" or "false" for a Go boolean text (strconv.ParseBool), else NULL. */
const char *nl__config_bool_text(const char *s);
/* Sets *err as upstream says a feature gate's value is no boolean; returns -1. */
int nl__config_gate_error(const char *key, const char *value, nl_err_t **err);
void nl__strlist_add(nl_config_list_t *l, const char *s);
void nl__strlist_free(nl_config_list_t *l);
/* Adds a value under key (creating it); for map[string]string, replaces. */
void nl__strmap_add(nl_config_map_t *m, const char *key, const char *value, int replace);
void nl__strmap_del(nl_config_map_t *m, const char *key);
void nl__strmap_free(nl_config_map_t *m);

#endif
