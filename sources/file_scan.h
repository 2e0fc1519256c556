/* Internal to the file source: one scan of staticPodPath, run on the libuv
 * thread pool. The worker does blocking I/O only (stat, readdir, open, read);
 * it reads the source's `files` map, which the loop leaves alone while a scan is
 * in flight, and writes only into the scan struct. */
#ifndef NL_SOURCES_FILE_SCAN_H
#define NL_SOURCES_FILE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "reactor/map.h"

/* What identifies a version of a file without reading it. Timestamps alone are
 * coarse (a jiffy), so events and the periodic re-read force a read anyway. */
typedef struct nl_file_key {
  dev_t dev;
  ino_t ino;
  off_t size;
  int64_t mtime_ns, ctime_ns;
} nl_file_key_t;

/* What the loop knows about one file; kept in nl_file_source_t.files. */
typedef struct nl_file_entry {
  nl_file_key_t key;
  uint64_t hash;      /* of the bytes last read; 0 with have_hash false */
  bool have_hash;
  int last_err;       /* errno-like code of the last failure, 0 if none */
  uint64_t err_hash;  /* content hash the last error was reported for */
  struct nl_pod *pod; /* last good pod, owned; NULL if never good */
} nl_file_entry_t;

enum nl_file_kind { NL_FK_MISSING, NL_FK_DIR, NL_FK_REGULAR, NL_FK_OTHER, NL_FK_ERROR };

typedef struct nl_file_result {
  char *path;       /* full path, owned */
  int err;          /* 0, or a positive errno (EFBIG: over the size cap) */
  bool not_regular; /* a subdirectory or special file: skipped, reported */
  bool unchanged;   /* same as the entry the loop has: nothing to decode */
  nl_file_key_t key;
  uint64_t hash;
  char *data; /* owned; NUL-terminated after len; NULL when unchanged or err */
  size_t len;
} nl_file_result_t;

typedef struct nl_file_scan {
  uv_work_t req;
  void *owner; /* the nl_file_source_t */
  /* input */
  char *path;
  bool force_all;
  nl_map_t force;            /* names (not paths) to re-read; owned by the scan */
  nl_map_t gone;             /* names deleted or moved away before the scan; owned */
  const nl_map_t *known;     /* the source's files map, read-only */
  size_t max_bytes;
  /* output */
  enum nl_file_kind kind;
  int path_err;              /* errno when kind is NL_FK_ERROR */
  dev_t path_dev;            /* of the directory, when kind is NL_FK_DIR */
  ino_t path_ino;
  nl_file_result_t *results; /* sorted by path */
  size_t n, cap;
} nl_file_scan_t;

/* The uv_work_cb: fills the output fields. */
void nl__file_scan_run(uv_work_t *req);
void nl__file_scan_free(nl_file_scan_t *scan);
uint64_t nl__file_hash(const void *data, size_t len);

#endif
