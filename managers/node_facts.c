/* The host facts of the Node: what upstream gets from cadvisor's MachineInfo
 * and VersionInfo. Runs on the thread pool (nl_node_facts_read blocks). */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/utsname.h>

#include "managers/node.h"
#include "reactor/xalloc.h"

nl_node_paths_t nl_node_paths_host(const char *root_dir) {
  return (nl_node_paths_t){
      .machine_id = "/etc/machine-id",
      .product_uuid = "/sys/class/dmi/id/product_uuid",
      .boot_id = "/proc/sys/kernel/random/boot_id",
      .os_release = "/etc/os-release",
      .meminfo = "/proc/meminfo",
      .cpu_online = "/sys/devices/system/cpu/online",
      .hugepages = "/sys/kernel/mm/hugepages",
      .root_dir = root_dir,
  };
}

/* The first line of a small file, trimmed; "" when unreadable. */
static char *first_line(const char *path) {
  char line[512] = "";
  FILE *f = path ? fopen(path, "re") : NULL;
  if (f) {
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
  }
  size_t n = strlen(line);
  while (n && isspace((unsigned char)line[n - 1])) line[--n] = '\0';
  return nl_xstrdup(line);
}

/* PRETTY_NAME, unquoted; "Linux" without one, as cadvisor. */
static char *os_image(const char *path) {
  FILE *f = fopen(path, "re");
  char line[512];
  char *out = NULL;
  while (f && !out && fgets(line, sizeof line, f)) {
    if (strncmp(line, "PRETTY_NAME=", 12) != 0) continue;
    char *v = line + 12;
    size_t n = strcspn(v, "\n");
    v[n] = '\0';
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
      v[n - 1] = '\0';
      v++;
    }
    out = nl_xstrdup(v);
  }
  if (f) fclose(f);
  return out ? out : nl_xstrdup("Linux");
}

static int64_t mem_total(const char *path) {
  FILE *f = fopen(path, "re");
  char line[256];
  long long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) break;
  if (f) fclose(f);
  return (int64_t)kb * 1024;
}

/* "0-3,6,8-9" -> 7 */
static int64_t cpus_online(const char *path) {
  char *s = first_line(path);
  int64_t n = 0;
  for (char *p = s; *p;) {
    char *end;
    long a = strtol(p, &end, 10), b = a;
    if (end == p) break;
    if (*end == '-') b = strtol(end + 1, &end, 10);
    if (b >= a) n += b - a + 1;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',') break;
  }
  free(s);
  return n;
}

static void hugepages(const char *dir, nl_node_facts_t *out) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) && out->n_hugepages < 4) {
    long long kb;
    if (sscanf(e->d_name, "hugepages-%lldkB", &kb) != 1) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s/nr_hugepages", dir, e->d_name);
    char *s = first_line(path);
    long long pages = atoll(s);
    free(s);
    out->hugepages[out->n_hugepages++] =
        (struct nl_node_hugepages){(int64_t)kb * 1024, (int64_t)pages * kb * 1024};
  }
  if (d) closedir(d);
}

void nl_node_facts_read(const nl_node_paths_t *p, nl_node_facts_t *out) {
  *out = (nl_node_facts_t){0};
  out->machine_id = first_line(p->machine_id);
  out->system_uuid = first_line(p->product_uuid);
  out->boot_id = first_line(p->boot_id);
  out->os_image = os_image(p->os_release);
  struct utsname u;
  out->kernel_version = nl_xstrdup(uname(&u) == 0 ? u.release : "");
  out->memory_bytes = mem_total(p->meminfo);
  out->cpus = cpus_online(p->cpu_online);
  struct statfs st;
  out->ephemeral_bytes = p->root_dir && statfs(p->root_dir, &st) == 0
                             ? (int64_t)st.f_blocks * (int64_t)st.f_frsize
                             : -1;
  hugepages(p->hugepages, out);
}
