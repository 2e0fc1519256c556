/* Shared by the seed generators of the fuzz targets that take a server's byte
 * stream (test/fuzz/cri, test/fuzz/kube): input byte 0 says how the target cuts
 * the rest into recv() calls, the rest is what the server sent. */
#ifndef NL_FUZZ_SEEDS_H
#define NL_FUZZ_SEEDS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes DIR/seed-SHAPE-CUT; exits on failure. */
static inline void fuzz_seed_write(const char *dir, int shape, uint8_t cut, const void *data,
                                   size_t len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/seed-%d-%u", dir, shape, cut);
  FILE *fp = fopen(path, "wb");
  if (!fp) {
    perror(path);
    exit(1);
  }
  fwrite(&cut, 1, 1, fp);
  fwrite(data, 1, len, fp);
  fclose(fp);
}

/* main() of a generator: one(DIR, shape, cut) for every shape, whole (cut 0)
 * and in pieces of 21 bytes (cut 3). */
static inline int fuzz_seeds_main(int argc, char **argv, int nshapes,
                                  void (*one)(const char *dir, int shape, uint8_t cut)) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (int s = 0; s < nshapes; s++) {
    one(argv[1], s, 0);
    one(argv[1], s, 3);
  }
  return 0;
}

#endif
