/* The command line, parsed as pflag does for the upstream kubelet:
 * --name=value, --name value, --bool, --bool=false, -v=4, -v 4, -h. */
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "agent/config_fields.h"
#include "agent/config_ignored.h"
#include "reactor/xalloc.h"

static const nl_config_field_t *flag_by_name(const char *name, size_t len) {
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const char *f = nl__config_fields[i].flag;
    if (f && strlen(f) == len && strncmp(f, name, len) == 0) return &nl__config_fields[i];
  }
  return NULL;
}

/* Splits argv[*i] into flag name and value; returns NULL for a non-flag. */
static const char *flag_name(const char *arg, size_t *len, const char **value) {
  if (arg[0] != '-' || arg[1] == '\0') return NULL;
  const char *name = arg + (arg[1] == '-' ? 2 : 1);
  const char *eq = strchr(name, '=');
  *len = eq ? (size_t)(eq - name) : strlen(name);
  *value = eq ? eq + 1 : NULL;
  return name;
}

const char *nl_flags_find(int argc, char **argv, const char *flag) {
  size_t want = strlen(flag);
  for (int i = 1; i < argc; i++) {
    size_t len;
    const char *value;
    const char *name = flag_name(argv[i], &len, &value);
    if (!name || len != want || strncmp(name, flag, want) != 0) continue;
    if (value) return value;
    return i + 1 < argc ? argv[i + 1] : NULL;
  }
  return NULL;
}

int nl_flags_parse(nl_kubelet_config_t *cfg, int argc, char **argv, bool *want_help,
                   bool *want_version, nl_err_t **err) {
  *want_help = *want_version = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    size_t len;
    const char *value;
    const char *name = flag_name(arg, &len, &value);
    if (!name)
      return nl_err_set(err, NL_EINVAL, "unknown command \"%s\" for \"nanolet\"", arg);
    if (len == 0) /* "--": nothing may follow, as the kubelet takes no arguments */
      return i + 1 < argc ? nl_err_set(err, NL_EINVAL, "unknown command \"%s\" for \"nanolet\"",
                                       argv[i + 1])
                          : 0;
    if ((len == 4 && strncmp(name, "help", 4) == 0) || (len == 1 && name[0] == 'h')) {
      *want_help = true;
      continue;
    }
    if (len == 7 && strncmp(name, "version", 7) == 0) {
      *want_version = true;
      continue;
    }
    const nl_config_field_t *f = flag_by_name(name, len);
    if (!f) return nl_err_set(err, NL_EINVAL, "unknown flag: %s", arg);
    if (!value && f->type == NL_F_BOOL) value = "true";
    if (!value) {
      if (i + 1 >= argc)
        return nl_err_set(err, NL_EINVAL, "flag needs an argument: --%s", f->flag);
      value = argv[++i];
    }
    nl_err_t *inner = NULL;
    if (nl__config_set_scalar(cfg, f, value, &inner) < 0) {
      nl_err_set(err, NL_EINVAL, "invalid argument \"%s\" for \"--%s\" flag: %s", value, f->flag,
                 nl_err_msg(inner));
      nl_err_free(&inner);
      return -1;
    }
    cfg->set_by[f - nl__config_fields] = NL_CONFIG_FLAG;
  }
  return 0;
}

void nl_flags_usage(FILE *out) {
  fprintf(out,
          "nanolet is a Kubernetes node agent (a kubelet) for edge nodes.\n\n"
          "Usage:\n"
          "  nanolet [flags]\n"
          "  nanolet cri COMMAND ...           talk to the container runtime (like crictl)\n"
          "  nanolet manifest check FILE...    decode, default and validate pod manifests\n"
          "  nanolet shutdown-hook [flags]     stop the pods before the machine goes down\n\n"
          "Flags:\n");
  for (size_t i = 0; i < nl__config_nfields; i++) {
    const nl_config_field_t *f = &nl__config_fields[i];
    if (!f->flag || !f->help) continue;
    const char *arg = "";
    switch (f->type) {
    case NL_F_STRING: arg = " string"; break;
    case NL_F_INT32: arg = " int32"; break;
    case NL_F_INT64: arg = " int"; break;
    case NL_F_DURATION: arg = " duration"; break;
    case NL_F_STRLIST: arg = " strings"; break;
    case NL_F_TAINTS: arg = " []Taint"; break;
    case NL_F_STRMAP: arg = " mapStringString"; break;
    case NL_F_BOOLMAP: arg = " mapStringBool"; break;
    case NL_F_PRIORITIES: break; /* file only */
    case NL_F_STRLISTMAP: arg = " colonSeparatedMultimapStringString"; break;
    case NL_F_BOOL: break;
    }
    char left[96];
    snprintf(left, sizeof left, "%s--%s%s", strcmp(f->flag, "v") == 0 ? "-v, " : "    ",
             f->flag, arg);
    const nl_config_ignored_t *ig = nl__config_ignored_find(f);
    fprintf(out, "  %-54s %s%s\n", left, f->help,
            !ig          ? ""
            : ig->file   ? " (not supported yet: must be readable, then ignored)"
            : ig->note   ? " (only partly supported)"
                         : " (not supported yet: ignored)");
  }
  fprintf(out, "  %-54s %s\n  %-54s %s\n", "-h, --help", "help for nanolet", "    --version",
          "Print version information and quit");
}
