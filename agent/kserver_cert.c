/* The kubelet server's self-signed certificate, as upstream's InitializeTLS:
 * without tlsCertFile/tlsPrivateKeyFile, <cert-dir>/kubelet.crt and kubelet.key
 * are used when readable and generated otherwise (CN "<host>@<unix time>",
 * valid from an hour ago for a year, the host name and node IPs as SANs). An
 * EC P-256 key instead of upstream's RSA 2048: as good for TLS and generated
 * in milliseconds on a small CPU. Runs once at start-up, before the loop. */
#include "agent/kserver_cert.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>

#include "agent/cert_x509.h"
#include "reactor/log.h"
#include "reactor/xalloc.h"

static void x509_time(time_t t, char out[15]) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 15, "%Y%m%d%H%M%S", &tm);
}

/* Written whole or not at all (a temporary file, fsync, rename): a power cut
 * leaves the old file or the new one. */
static int write_file(const char *path, const unsigned char *data, mode_t mode, nl_err_t **err) {
  char *tmp = nl_xasprintf("%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  int e = 0;
  if (fd < 0) {
    e = errno;
    goto fail;
  }
  size_t len = strlen((const char *)data), off = 0;
  while (off < len) {
    ssize_t n = write(fd, data + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      e = errno;
      break;
    }
    off += (size_t)n;
  }
  if (!e && fsync(fd) < 0) e = errno;
  if (close(fd) < 0 && !e) e = errno;
  if (!e && rename(tmp, path) < 0) e = errno;
  if (!e) {
    free(tmp);
    return 0;
  }
  unlink(tmp);
fail:
  free(tmp);
  return nl_err_set(err, e, "write %s: %s", path, strerror(e));
}

int nl_kserver_self_signed(const char *cert_path, const char *key_path, const char *host,
                           const char *ips, nl_err_t **err) {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_pk_context key;
  mbedtls_x509write_cert crt;
  mbedtls_mpi serial;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  mbedtls_pk_init(&key);
  mbedtls_x509write_crt_init(&crt);
  mbedtls_mpi_init(&serial);
  unsigned char *pem = nl_xmalloc(8192);
  int rc = -1, ret;
  static const char pers[] = "nanolet-kubelet-cert";
  if ((ret = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
                                   (const unsigned char *)pers, sizeof(pers) - 1)) != 0) {
    nl_x509_mbed_err(err, ret, "seed the random generator");
    goto out;
  }
  if ((ret = mbedtls_pk_setup(&key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY))) != 0 ||
      (ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(key),
                                 mbedtls_ctr_drbg_random, &drbg)) != 0) {
    nl_x509_mbed_err(err, ret, "generate a key");
    goto out;
  }
  time_t now = time(NULL);
  char subject[320], from[15], to[15];
  snprintf(subject, sizeof(subject), "CN=%s@%lld", host, (long long)now);
  x509_time(now - 3600, from);
  x509_time(now - 3600 + 365 * 24 * 3600, to);
  unsigned char rnd[8];
  mbedtls_ctr_drbg_random(&drbg, rnd, sizeof(rnd));
  rnd[0] &= 0x7f; /* a positive serial */
  rnd[0] |= 0x01;
  mbedtls_mpi_read_binary(&serial, rnd, sizeof(rnd));
  mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
  mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
  mbedtls_x509write_crt_set_subject_key(&crt, &key);
  mbedtls_x509write_crt_set_issuer_key(&crt, &key);
  unsigned char san[1024], *san_start = NULL;
  int san_len;
  if ((ret = mbedtls_x509write_crt_set_subject_name(&crt, subject)) != 0 ||
      (ret = mbedtls_x509write_crt_set_issuer_name(&crt, subject)) != 0 ||
      (ret = mbedtls_x509write_crt_set_serial(&crt, &serial)) != 0 ||
      (ret = mbedtls_x509write_crt_set_validity(&crt, from, to)) != 0 ||
      (ret = mbedtls_x509write_crt_set_basic_constraints(&crt, 0, -1)) != 0 ||
      (ret = mbedtls_x509write_crt_set_key_usage(
           &crt, MBEDTLS_X509_KU_DIGITAL_SIGNATURE | MBEDTLS_X509_KU_KEY_ENCIPHERMENT)) != 0 ||
      (ret = mbedtls_x509write_crt_set_ns_cert_type(&crt, MBEDTLS_X509_NS_CERT_TYPE_SSL_SERVER)) != 0 ||
      (ret = san_len = nl_x509_san_write(san, sizeof(san), &san_start, host, ips)) < 0 ||
      (ret = mbedtls_x509write_crt_set_extension(&crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
                                                 MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0,
                                                 san_start, (size_t)san_len)) != 0) {
    nl_x509_mbed_err(err, ret, "build the certificate");
    goto out;
  }
  if ((ret = mbedtls_x509write_crt_pem(&crt, pem, 8192, mbedtls_ctr_drbg_random, &drbg)) != 0) {
    nl_x509_mbed_err(err, ret, "sign the certificate");
    goto out;
  }
  /* the key first: a kill between the two leaves a pair that does not
   * match, which the next start replaces (kserver.c), never a certificate
   * whose key is lost */
  unsigned char *key_pem = nl_xmalloc(8192);
  if ((ret = mbedtls_pk_write_key_pem(&key, key_pem, 8192)) != 0) {
    free(key_pem);
    nl_x509_mbed_err(err, ret, "encode the key");
    goto out;
  }
  int wrote = write_file(key_path, key_pem, 0600, err);
  free(key_pem);
  if (wrote < 0 || write_file(cert_path, pem, 0644, err) < 0) goto out;
  nl_info("kubelet server: generated a self-signed certificate %s for %s%s%s", cert_path, host,
          ips && *ips ? ", " : "", ips ? ips : "");
  rc = 0;
out:
  free(pem);
  mbedtls_mpi_free(&serial);
  mbedtls_x509write_crt_free(&crt);
  mbedtls_pk_free(&key);
  mbedtls_ctr_drbg_free(&drbg);
  mbedtls_entropy_free(&entropy);
  return rc;
}
