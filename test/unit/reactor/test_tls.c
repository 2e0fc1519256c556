#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>

#include "reactor/tls.h"

#define FIX(name) FIXTURES "/tls/" name

/* Moves ciphertext from one engine to the other; returns the bytes moved. */
static size_t pump(nl_tls_t *from, nl_tls_t *to) {
  size_t len;
  char *out = nl_tls_take(from, &len);
  if (!out) return 0;
  nl_tls_feed(to, out, len);
  free(out);
  return len;
}

static nl_tls_config_t *cfg(const nl_tls_config_opts_t *o) {
  nl_tls_config_t *c = NULL;
  nl_err_t *err = NULL;
  if (nl_tls_config_new(&c, o, &err) < 0) fail_msg("%s", nl_err_msg(err));
  return c;
}

/* Two engines talking over memory only: the engine does no I/O. */
static int handshake(nl_tls_t *cl, nl_tls_t *sv, nl_err_t **err) {
  for (int i = 0; i < 20; i++) {
    int a = nl_tls_handshake(cl, err);
    if (a < 0) return -1;
    pump(cl, sv);
    int b = nl_tls_handshake(sv, err);
    if (b < 0) return -2;
    pump(sv, cl);
    if (a == 1 && b == 1) return 0;
  }
  return -3;
}

static void engine_over_memory(void **state) {
  nl_tls_config_opts_t so = {.server = true, .cert_file = FIX("server.crt"), .key_file = FIX("server.key")};
  nl_tls_config_opts_t co = {.verify = true, .ca_file = FIX("ca.crt")};
  nl_tls_config_t *s = cfg(&so), *c = cfg(&co);
  nl_tls_t *sv = nl_tls_new(s, NULL), *cl = nl_tls_new(c, "localhost");
  /* The sessions hold references: the owners may let go now. */
  nl_tls_config_unref(s);
  nl_tls_config_unref(c);
  nl_err_t *err = NULL;
  assert_int_equal(handshake(cl, sv, &err), 0);
  assert_true(nl_tls_handshake_done(cl));
  assert_int_equal(nl_tls_write(cl, "ping", 4, &err), 0);
  pump(cl, sv);
  char buf[64];
  assert_int_equal(nl_tls_read(sv, buf, sizeof(buf), &err), 4);
  assert_memory_equal(buf, "ping", 4);
  assert_int_equal(nl_tls_read(sv, buf, sizeof(buf), &err), 0); /* wants more */
  /* A large write spans several records. */
  size_t big = 100000;
  char *data = malloc(big);
  for (size_t i = 0; i < big; i++) data[i] = (char)i;
  assert_int_equal(nl_tls_write(sv, data, big, &err), 0);
  pump(sv, cl);
  size_t got = 0;
  char *back = malloc(big);
  ssize_t n;
  while ((n = nl_tls_read(cl, back + got, big - got, &err)) > 0) got += (size_t)n;
  assert_int_equal(got, big);
  assert_memory_equal(back, data, big);
  free(data);
  free(back);
  nl_tls_close_notify(cl);
  pump(cl, sv);
  assert_int_equal(nl_tls_read(sv, buf, sizeof(buf), &err), NL_TLS_EOF);
  nl_tls_free(cl);
  nl_tls_free(sv);
}

static void verification_failures(void **state) {
  nl_tls_config_opts_t so = {.server = true, .cert_file = FIX("server.crt"), .key_file = FIX("server.key")};
  nl_tls_config_t *s = cfg(&so);
  struct {
    const char *ca, *name, *want;
  } cases[] = {
      {FIX("other-ca.crt"), "localhost", "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
      {FIX("ca.crt"), "wrong.example", "x509: certificate is valid for localhost, not wrong.example"},
      {FIX("ca.crt"), "127.0.0.2", "doesn't contain any IP SANs matching it"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    nl_tls_config_opts_t co = {.verify = true, .ca_file = cases[i].ca};
    nl_tls_config_t *c = cfg(&co);
    nl_tls_t *sv = nl_tls_new(s, NULL), *cl = nl_tls_new(c, cases[i].name);
    nl_err_t *err = NULL;
    assert_int_equal(handshake(cl, sv, &err), -1);
    assert_int_equal(err->code, EPROTO);
    if (!strstr(err->msg, cases[i].want)) fail_msg("case %zu: %s", i, err->msg);
    nl_err_free(&err);
    nl_tls_free(cl);
    nl_tls_free(sv);
    nl_tls_config_unref(c);
  }
  /* The right IP passes. */
  nl_tls_config_opts_t co = {.verify = true, .ca_file = FIX("ca.crt")};
  nl_tls_config_t *c = cfg(&co);
  nl_tls_t *sv = nl_tls_new(s, NULL), *cl = nl_tls_new(c, "::1");
  nl_err_t *err = NULL;
  assert_int_equal(handshake(cl, sv, &err), 0);
  nl_tls_free(cl);
  nl_tls_free(sv);
  nl_tls_config_unref(c);
  nl_tls_config_unref(s);
}

/* ALPN: the server picks the first of its protocols the client offers; the
 * client learns it. Without a common protocol neither side names one. */
static void alpn(void **state) {
  static const char *const both[] = {"h2", "http/1.1", NULL};
  static const char *const h2[] = {"h2", NULL};
  static const char *const h1[] = {"http/1.1", NULL};
  static const char *const other[] = {"spdy/3", NULL};
  struct {
    const char *const *server, *const *client;
    const char *want;
  } cases[] = {
      {both, both, "h2"},
      {h1, both, "http/1.1"},
      {h2, h1, NULL}, /* mbedtls then fails the handshake: no_application_protocol */
      {NULL, both, "http/1.1"},
      {other, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    nl_tls_config_opts_t so = {.server = true, .cert_file = FIX("server.crt"),
                               .key_file = FIX("server.key"), .alpn = cases[i].server};
    nl_tls_config_opts_t co = {.verify = true, .ca_file = FIX("ca.crt"), .alpn = cases[i].client};
    nl_tls_config_t *s = cfg(&so), *c = cfg(&co);
    nl_tls_t *sv = nl_tls_new(s, NULL), *cl = nl_tls_new(c, "localhost");
    nl_err_t *err = NULL;
    int rc = handshake(cl, sv, &err);
    if (cases[i].want) {
      if (rc != 0) fail_msg("case %zu: %s", i, nl_err_msg(err));
      assert_string_equal(nl_tls_alpn(cl), cases[i].want);
      assert_string_equal(nl_tls_alpn(sv), cases[i].want);
    } else if (rc == 0) {
      assert_null(nl_tls_alpn(cl));
    }
    nl_err_free(&err);
    nl_tls_free(cl);
    nl_tls_free(sv);
    nl_tls_config_unref(s);
    nl_tls_config_unref(c);
  }
}

static void config_errors(void **state) {
  nl_tls_config_t *c = NULL;
  nl_err_t *err = NULL;
  nl_tls_config_opts_t o1 = {.verify = true};
  assert_int_equal(nl_tls_config_new(&c, &o1, &err), -1);
  assert_non_null(strstr(err->msg, "needs a CA"));
  nl_err_free(&err);
  nl_tls_config_opts_t o2 = {.ca_file = "/nonexistent/ca.crt"};
  assert_int_equal(nl_tls_config_new(&c, &o2, &err), -1);
  assert_non_null(strstr(err->msg, "/nonexistent/ca.crt"));
  nl_err_free(&err);
  nl_tls_config_opts_t o3 = {.server = true};
  assert_int_equal(nl_tls_config_new(&c, &o3, &err), -1);
  nl_err_free(&err);
  nl_tls_config_opts_t o4 = {.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"};
  assert_int_equal(nl_tls_config_new(&c, &o4, &err), -1);
  assert_non_null(strstr(err->msg, "CA certificate"));
  nl_err_free(&err);
  nl_tls_config_opts_t o5 = {.cert_file = FIX("server.crt"), .key_file = FIX("client.key")};
  assert_int_equal(nl_tls_config_new(&c, &o5, &err), -1);
  nl_err_free(&err);
  assert_null(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(engine_over_memory),
      cmocka_unit_test(verification_failures),
      cmocka_unit_test(config_errors),
      cmocka_unit_test(alpn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
