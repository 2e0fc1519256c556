#include "reactor/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/error.h>
#include <mbedtls/pk.h>
#include <mbedtls/oid.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ciphersuites.h>
#include <mbedtls/x509_crt.h>

#include "reactor/buf.h"
#include "reactor/x509_name.h"
#include "reactor/xalloc.h"

struct nl_tls_config {
  int refs;
  bool server, verify;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_ssl_config conf;
  mbedtls_x509_crt ca, cert;
  mbedtls_pk_context key;
};

struct nl_tls {
  nl_tls_config_t *cfg;
  mbedtls_ssl_context ssl;
  nl_buf_t in;  /* ciphertext from the peer, not yet consumed */
  nl_buf_t out; /* ciphertext for the peer */
  char *ip;     /* server_name when it is an IP literal: checked by hand */
  char *names;  /* the peer certificate's DNS names, for a mismatch message */
  bool done;
};

/* The DRBG's seed and reseeds come straight from the kernel (getrandom, as
 * mbedtls's own platform source does): an mbedtls_entropy_context would add
 * 37 KiB to every config for a pool that only feeds this. */
static int kernel_entropy(void *ctx, unsigned char *buf, size_t len) {
  (void)ctx;
  while (len > 0) {
    ssize_t n = getrandom(buf, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

static const char *const alpn_http1[] = {"http/1.1", NULL};

static int tls_fail(nl_err_t **err, int ret, const char *what) {
  char buf[160];
  mbedtls_strerror(ret, buf, sizeof(buf));
  return nl_err_set(err, EPROTO, "%s: %s (-0x%04x)", what, buf, (unsigned)-ret);
}

static int load_crt(mbedtls_x509_crt *crt, const char *file, const char *pem, const char *what,
                    nl_err_t **err) {
  int ret;
  if (file) {
    /* A positive result counts certificates of a bundle that did not parse;
     * the others are usable, as with Go's AppendCertsFromPEM. */
    ret = mbedtls_x509_crt_parse_file(crt, file);
    if (ret < 0) {
      tls_fail(err, ret, what);
      return nl_err_wrap(err, "%s", file);
    }
  } else {
    ret = mbedtls_x509_crt_parse(crt, (const unsigned char *)pem, strlen(pem) + 1);
    if (ret < 0) return tls_fail(err, ret, what);
  }
  return 0;
}

int nl_tls_config_new(nl_tls_config_t **out, const nl_tls_config_opts_t *o, nl_err_t **err) {
  *out = NULL;
  nl_tls_config_t *c = nl_xcalloc(1, sizeof(*c));
  c->refs = 1;
  c->server = o->server;
  c->verify = o->verify;
  mbedtls_ctr_drbg_init(&c->drbg);
  mbedtls_ssl_config_init(&c->conf);
  mbedtls_x509_crt_init(&c->ca);
  mbedtls_x509_crt_init(&c->cert);
  mbedtls_pk_init(&c->key);
  static const char pers[] = "nanolet-tls";
  int ret = mbedtls_ctr_drbg_seed(&c->drbg, kernel_entropy, NULL,
                                  (const unsigned char *)pers, sizeof(pers) - 1);
  if (ret != 0) {
    tls_fail(err, ret, "seed the random generator");
    goto fail;
  }
  ret = mbedtls_ssl_config_defaults(&c->conf, o->server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
                                    MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
  if (ret != 0) {
    tls_fail(err, ret, "TLS defaults");
    goto fail;
  }
  mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
  /* TLS 1.2 at least, as Go's crypto/tls client default (the API server). */
  mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                               o->min_minor ? o->min_minor : MBEDTLS_SSL_MINOR_VERSION_3);
  if (o->ciphersuites) mbedtls_ssl_conf_ciphersuites(&c->conf, o->ciphersuites);
  /* mbedtls keeps the list without copying and never writes it. */
  mbedtls_ssl_conf_alpn_protocols(&c->conf, (const char **)(o->alpn ? o->alpn : alpn_http1));
  if (o->ca_file || o->ca_pem) {
    if (load_crt(&c->ca, o->ca_file, o->ca_pem, "CA certificate", err) < 0) goto fail;
    mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
  } else if (o->verify) {
    nl_err_set(err, EINVAL, "TLS: verification needs a CA certificate");
    goto fail;
  }
  mbedtls_ssl_conf_authmode(&c->conf, o->verify                  ? MBEDTLS_SSL_VERIFY_REQUIRED
                                      : o->request_client_cert ? MBEDTLS_SSL_VERIFY_OPTIONAL
                                                               : MBEDTLS_SSL_VERIFY_NONE);
  if (o->request_client_cert && !(o->ca_file || o->ca_pem)) {
    nl_err_set(err, EINVAL, "TLS: verifying client certificates needs a CA certificate");
    goto fail;
  }
  bool have_cert = o->cert_file || o->cert_pem, have_key = o->key_file || o->key_pem;
  if (have_cert != have_key) {
    nl_err_set(err, EINVAL, "TLS: a certificate needs its key and a key its certificate");
    goto fail;
  }
  if (o->server && !have_cert) {
    nl_err_set(err, EINVAL, "TLS: a server needs a certificate and key");
    goto fail;
  }
  if (have_cert) {
    if (load_crt(&c->cert, o->cert_file, o->cert_pem, "certificate", err) < 0) goto fail;
    if (o->key_file) {
      ret = mbedtls_pk_parse_keyfile(&c->key, o->key_file, NULL);
    } else {
      ret = mbedtls_pk_parse_key(&c->key, (const unsigned char *)o->key_pem, strlen(o->key_pem) + 1,
                                 NULL, 0);
    }
    if (ret != 0) {
      tls_fail(err, ret, "private key");
      if (o->key_file) nl_err_wrap(err, "key file %s", o->key_file);
      goto fail;
    }
    if (mbedtls_pk_check_pair(&c->cert.pk, &c->key) != 0) {
      nl_err_set(err, EINVAL, "TLS: the private key does not match the certificate");
      goto fail;
    }
    ret = mbedtls_ssl_conf_own_cert(&c->conf, &c->cert, &c->key);
    if (ret != 0) {
      tls_fail(err, ret, "certificate and key");
      goto fail;
    }
  }
  *out = c;
  return 0;
fail:
  nl_tls_config_unref(c);
  return -1;
}

nl_tls_config_t *nl_tls_config_ref(nl_tls_config_t *c) {
  c->refs++;
  return c;
}

void nl_tls_config_unref(nl_tls_config_t *c) {
  if (!c || --c->refs > 0) return;
  mbedtls_ssl_config_free(&c->conf);
  mbedtls_x509_crt_free(&c->ca);
  mbedtls_x509_crt_free(&c->cert);
  mbedtls_pk_free(&c->key);
  mbedtls_ctr_drbg_free(&c->drbg);
  free(c);
}

bool nl_tls_config_is_server(const nl_tls_config_t *c) { return c->server; }

static int bio_send(void *ctx, const unsigned char *buf, size_t len) {
  nl_tls_t *t = ctx;
  nl_buf_append(&t->out, buf, len);
  return (int)len;
}

#define IN_KEEP 8192

static int bio_recv(void *ctx, unsigned char *buf, size_t len) {
  nl_tls_t *t = ctx;
  if (t->in.len == 0) return MBEDTLS_ERR_SSL_WANT_READ;
  size_t n = len < t->in.len ? len : t->in.len;
  memcpy(buf, t->in.data, n);
  nl_buf_consume(&t->in, n);
  /* a burst grew it (a 16 KiB read makes 32 KiB); idle traffic needs a few */
  if (t->in.len == 0 && t->in.cap > IN_KEEP) nl_buf_free(&t->in);
  return (int)n;
}

static int on_verify(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags);
static int on_verify_client(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags);

static bool is_ip(const char *s, unsigned char *bin, size_t *binlen) {
  if (inet_pton(AF_INET, s, bin) == 1) {
    *binlen = 4;
    return true;
  }
  if (inet_pton(AF_INET6, s, bin) == 1) {
    *binlen = 16;
    return true;
  }
  return false;
}

nl_tls_t *nl_tls_new(nl_tls_config_t *cfg, const char *server_name) {
  nl_tls_t *t = nl_xcalloc(1, sizeof(*t));
  t->cfg = nl_tls_config_ref(cfg);
  mbedtls_ssl_init(&t->ssl);
  if (mbedtls_ssl_setup(&t->ssl, &cfg->conf) != 0) abort(); /* only fails on allocation */
  unsigned char bin[16];
  size_t binlen;
  if (!cfg->server && server_name && *server_name) {
    /* mbedtls 2.28 matches names only against DNS entries; an IP literal is
     * neither sent as SNI (RFC 6066) nor given to it, and checked by hand. */
    if (is_ip(server_name, bin, &binlen)) {
      t->ip = nl_xstrdup(server_name);
    } else if (mbedtls_ssl_set_hostname(&t->ssl, server_name) != 0) {
      abort();
    }
  }
  mbedtls_ssl_set_bio(&t->ssl, t, bio_send, bio_recv, NULL);
  mbedtls_ssl_set_verify(&t->ssl, cfg->server ? on_verify_client : on_verify, t);
  return t;
}

void nl_tls_free(nl_tls_t *t) {
  if (!t) return;
  mbedtls_ssl_free(&t->ssl);
  nl_buf_free(&t->in);
  nl_buf_free(&t->out);
  free(t->ip);
  free(t->names);
  nl_tls_config_unref(t->cfg);
  free(t);
}

void nl_tls_feed(nl_tls_t *t, const void *data, size_t len) { nl_buf_append(&t->in, data, len); }

/* subjectAltName iPAddress entries, as Go's crypto/x509 VerifyHostname does for
 * an IP host. */
static int check_ip_san(nl_tls_t *t, nl_err_t **err) {
  const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(&t->ssl);
  unsigned char want[16];
  size_t wantlen = 0;
  is_ip(t->ip, want, &wantlen);
  if (peer) {
    for (const mbedtls_x509_sequence *s = &peer->subject_alt_names; s; s = s->next) {
      if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && s->buf.len == wantlen &&
          memcmp(s->buf.p, want, wantlen) == 0)
        return 0;
    }
  }
  return nl_err_set(err, EPROTO,
                    "x509: cannot validate certificate for %s because it doesn't contain any "
                    "IP SANs matching it",
                    t->ip);
}

/* Go's x509.HostnameError: "certificate is valid for a, b, not c". */
static int name_mismatch(nl_tls_t *t, nl_err_t **err) {
  return nl_err_set(err, EPROTO,
                    "tls: failed to verify certificate: x509: certificate is valid for %s, not %s",
                    t->names ? t->names : "no names", t->ssl.hostname ? t->ssl.hostname : "");
}

/* Notes the leaf's DNS names while mbedtls verifies it: a failed handshake
 * keeps no peer certificate to read them from afterwards. */
static int on_verify(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags) {
  nl_tls_t *t = ctx;
  if (depth != 0) return 0; /* the name check's flag is merged after this callback */
  nl_buf_t names = NL_BUF_INIT;
  for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s; s = s->next) {
    if (s->buf.tag != (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)) continue; /* dNSName */
    nl_buf_printf(&names, "%s%.*s", names.len ? ", " : "", (int)s->buf.len, (const char *)s->buf.p);
  }
  free(t->names);
  t->names = names.len ? nl_buf_steal(&names) : NULL;
  nl_buf_free(&names);
  return 0;
}

/* A client certificate's chain, from the trusted root down to the leaf: as Go's
 * Verify with KeyUsages ClientAuth (checkChainForKeyUsage), every certificate
 * that lists extended key usages must allow clientAuth or any; mbedtls itself
 * checks the leaf's only. */
static int on_verify_client(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags) {
  (void)ctx;
  (void)depth;
  if (mbedtls_x509_crt_check_extended_key_usage(crt, MBEDTLS_OID_CLIENT_AUTH,
                                                 MBEDTLS_OID_SIZE(MBEDTLS_OID_CLIENT_AUTH)) != 0)
    *flags |= MBEDTLS_X509_BADCERT_EXT_KEY_USAGE;
  return 0;
}

static int verify_fail(nl_tls_t *t, uint32_t flags, nl_err_t **err) {
  const char *go = NULL;
  if (flags & (MBEDTLS_X509_BADCERT_NOT_TRUSTED | MBEDTLS_X509_BADCERT_MISSING))
    go = "x509: certificate signed by unknown authority";
  else if (flags & (MBEDTLS_X509_BADCERT_EXPIRED | MBEDTLS_X509_BADCERT_FUTURE))
    go = "x509: certificate has expired or is not yet valid";
  else if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
    return name_mismatch(t, err);
  else if (flags & MBEDTLS_X509_BADCERT_EXT_KEY_USAGE)
    go = "x509: certificate specifies an incompatible key usage";
  if (go) return nl_err_set(err, EPROTO, "tls: failed to verify certificate: %s", go);
  char info[256];
  mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
  size_t n = strlen(info);
  while (n && (info[n - 1] == '\n')) info[--n] = 0;
  for (char *p = info; *p; p++)
    if (*p == '\n') *p = ';';
  return nl_err_set(err, EPROTO, "tls: failed to verify certificate: %s", info);
}

int nl_tls_handshake(nl_tls_t *t, nl_err_t **err) {
  if (t->done) return 1;
  int ret = mbedtls_ssl_handshake(&t->ssl);
  if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return 0;
  if (ret != 0) {
    uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
    if (ret == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags != 0 && flags != (uint32_t)-1)
      return verify_fail(t, flags, err);
    return tls_fail(err, ret, "tls: handshake");
  }
  if (t->ip && t->cfg->verify && check_ip_san(t, err) < 0) return -1;
  t->done = true;
  return 1;
}

bool nl_tls_is_server(const nl_tls_t *t) { return t->cfg->server; }

bool nl_tls_handshake_done(const nl_tls_t *t) { return t->done; }

const char *nl_tls_alpn(const nl_tls_t *t) { return mbedtls_ssl_get_alpn_protocol(&t->ssl); }

ssize_t nl_tls_read(nl_tls_t *t, void *buf, size_t cap, nl_err_t **err) {
  int ret = mbedtls_ssl_read(&t->ssl, buf, cap);
  if (ret > 0) return ret;
  if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) return 0;
  if (ret == 0 || ret == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) return NL_TLS_EOF;
  return tls_fail(err, ret, "tls: read");
}

int nl_tls_write(nl_tls_t *t, const void *data, size_t len, nl_err_t **err) {
  const unsigned char *p = data;
  while (len > 0) {
    /* The output is memory, so a write never waits for the peer. */
    int ret = mbedtls_ssl_write(&t->ssl, p, len);
    if (ret < 0) return tls_fail(err, ret, "tls: write");
    p += ret;
    len -= (size_t)ret;
  }
  return 0;
}

void nl_tls_close_notify(nl_tls_t *t) { (void)mbedtls_ssl_close_notify(&t->ssl); }

char *nl_tls_take(nl_tls_t *t, size_t *len) {
  *len = t->out.len;
  if (t->out.len == 0) return NULL;
  return nl_buf_steal(&t->out);
}

/* ---- server side: the client's certificate ------------------------------ */

int nl_tls_peer_identity(const nl_tls_t *t, nl_tls_peer_t *out, nl_err_t **err) {
  memset(out, 0, sizeof(*out));
  const mbedtls_x509_crt *peer = mbedtls_ssl_get_peer_cert(&t->ssl);
  if (!peer) return 0;
  uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
  if (flags != 0) return verify_fail((nl_tls_t *)t, flags, err);
  /* Go's crypto/tls refuses a client certificate (chain) whose names do not
   * parse: "tls: failed to parse client certificate: x509: ...". */
  for (const mbedtls_x509_crt *c = peer; c && c->raw.p; c = c->next) {
    if (nl_x509_name_decode(&c->subject, c == peer ? &out->cn : NULL, c == peer ? &out->orgs : NULL,
                            err) < 0 ||
        nl_x509_name_decode(&c->issuer, NULL, NULL, err) < 0) {
      nl_tls_peer_free(out);
      return nl_err_wrap(err, "tls: failed to parse client certificate");
    }
  }
  return 1;
}

void nl_tls_peer_free(nl_tls_peer_t *p) {
  free(p->cn);
  for (char **o = p->orgs; o && *o; o++) free(*o);
  free(p->orgs);
  memset(p, 0, sizeof(*p));
}

int nl_tls_version_parse(const char *name, int *min_minor, nl_err_t **err) {
  if (!name || !*name || strcmp(name, "VersionTLS12") == 0) *min_minor = MBEDTLS_SSL_MINOR_VERSION_3;
  else if (strcmp(name, "VersionTLS11") == 0) *min_minor = MBEDTLS_SSL_MINOR_VERSION_2;
  else if (strcmp(name, "VersionTLS10") == 0) *min_minor = MBEDTLS_SSL_MINOR_VERSION_1;
  else if (strcmp(name, "VersionTLS13") == 0)
    return nl_err_set(err, NL_EINVAL, "%s is not supported: this build speaks TLS 1.2 at most", name);
  else
    return nl_err_set(err, NL_EINVAL,
                      "unknown TLS version \"%s\" (VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13)",
                      name);
  /* The self-contained build's mbedtls has TLS 1.2 only (docs/INSTALL.md). */
#if !defined(MBEDTLS_SSL_PROTO_TLS1) || !defined(MBEDTLS_SSL_PROTO_TLS1_1)
  if (*min_minor != MBEDTLS_SSL_MINOR_VERSION_3)
    return nl_err_set(err, NL_EINVAL, "%s is not supported: this build speaks TLS 1.2 only", name);
#endif
  return 0;
}

int nl_tls_ciphersuite_parse(const char *name, int *id, nl_err_t **err) {
  *id = 0;
  static const char *const tls13[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                      "TLS_CHACHA20_POLY1305_SHA256", NULL};
  for (int i = 0; tls13[i]; i++)
    if (strcmp(name, tls13[i]) == 0) return 0;
  /* Go's names are IANA's; mbedtls spells them with dashes. Go's short
   * aliases of the ChaCha20 suites lack the "_SHA256". */
  char buf[128];
  if (strlen(name) + 8 >= sizeof(buf)) goto unknown;
  strcpy(buf, name);
  size_t n = strlen(buf);
  if (n > 18 && strcmp(buf + n - 18, "_CHACHA20_POLY1305") == 0) strcat(buf, "_SHA256");
  for (char *p = buf; *p; p++)
    if (*p == '_') *p = '-';
  *id = mbedtls_ssl_get_ciphersuite_id(buf);
  if (*id != 0) return 0;
unknown:
  return nl_err_set(err, NL_EINVAL, "unsupported cipher suite \"%s\"", name);
}
