/* mbedtls's strong entropy source for the self-contained and static builds
 * (MBEDTLS_ENTROPY_HARDWARE_ALT in nanolet_config.h): the kernel's, through
 * getrandom(2) (glibc 2.25, musl 1.1.20), which needs no /dev/urandom. */
#include <errno.h>
#include <stddef.h>
#include <sys/random.h>

int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen);

int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen) {
  (void)data;
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom(output + got, len - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *olen = got;
      return -1;
    }
    got += (size_t)n;
  }
  *olen = got;
  return 0;
}
