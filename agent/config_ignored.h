/* The settings nanolet parses but does not act on yet (agent/config_ignored.c
 * holds the list). Internal to agent/ and its tests. */
#ifndef NL_CONFIG_IGNORED_H
#define NL_CONFIG_IGNORED_H

#include <stdbool.h>

#include "agent/config_fields.h"

typedef struct nl_config_ignored {
  const char *name; /* the field's file name, or its flag name when it has none */
  bool file;        /* a file that must be readable, then ignored */
  /* What nanolet does with it, when it uses it in part or (file) why it is
   * ignored; said in the warning, --help and docs/DIFFERENCES.md. */
  const char *note;
} nl_config_ignored_t;

/* Ends with {NULL}. */
extern const nl_config_ignored_t nl__config_ignored[];

/* The table entry of an ignored setting; NULL when the name matches none. */
const nl_config_field_t *nl__config_ignored_field(const nl_config_ignored_t *ig);
/* The list's entry for a field; NULL when nanolet acts on the field. */
const nl_config_ignored_t *nl__config_ignored_find(const nl_config_field_t *f);

#endif
