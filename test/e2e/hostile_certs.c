/* The client certificates of e2e hostile_auth, made with test/unit/reactor/pki.c:
 *   hostile_certs DIR USER
 * writes into DIR a client CA (ca.crt, ca.key) and, each with its .key:
 *   t61.crt      CN T61String "caf\xe9", O T61String "\xe9quipe"
 *   user.crt     CN USER (the positive control)
 *   nul.crt      CN "USER\0evil"
 *   srvint.crt   USER issued by an intermediate restricted to serverAuth
 *                (the chain: leaf, then intermediate)
 *   cliint.crt   the same through an intermediate for clientAuth */
#include <mbedtls/asn1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/reactor/pki.h"

static const char *dir;

static void put(const char *name, const char *a, const char *b) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(a, f) < 0 || (b && fputs(b, f) < 0) || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

static void leaf(const char *name, test_pki_req_t r, const char *issuer, const char *issuer_key,
                 const char *chain) {
  r.issuer_name = issuer;
  r.issuer_key_pem = issuer_key;
  r.eku = "clientAuth";
  char *key, *crt = test_pki_issue(&r, &key), path[256];
  snprintf(path, sizeof path, "%s.crt", name);
  put(path, crt, chain);
  snprintf(path, sizeof path, "%s.key", name);
  put(path, key, NULL);
  free(crt);
  free(key);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: hostile_certs DIR USER\n");
    return 2;
  }
  dir = argv[1];
  const char *user = argv[2];
  char *ca_key, *ca = test_pki_issue(&(test_pki_req_t){.cn = "nl-hostile-ca", .ca = true}, &ca_key);
  put("ca.crt", ca, NULL);
  put("ca.key", ca_key, NULL);
  leaf("t61",
       (test_pki_req_t){.cn = "caf\xe9",
                        .cn_tag = MBEDTLS_ASN1_T61_STRING,
                        .org = "\xe9quipe",
                        .org_tag = MBEDTLS_ASN1_T61_STRING},
       "CN=nl-hostile-ca", ca_key, NULL);
  leaf("user", (test_pki_req_t){.cn = user}, "CN=nl-hostile-ca", ca_key, NULL);
  char nul[256];
  size_t n = (size_t)snprintf(nul, sizeof nul, "%s%cevil", user, 0);
  leaf("nul", (test_pki_req_t){.cn = nul, .cn_len = n}, "CN=nl-hostile-ca", ca_key, NULL);
  const char *ekus[] = {"serverAuth", "clientAuth"}, *names[] = {"srvint", "cliint"};
  for (int i = 0; i < 2; i++) {
    char dn[64], *ikey,
        *icrt = test_pki_issue(&(test_pki_req_t){.cn = names[i],
                                                 .ca = true,
                                                 .eku = ekus[i],
                                                 .issuer_name = "CN=nl-hostile-ca",
                                                 .issuer_key_pem = ca_key},
                               &ikey);
    snprintf(dn, sizeof dn, "CN=%s", names[i]);
    leaf(names[i], (test_pki_req_t){.cn = user}, dn, ikey, icrt);
    free(icrt);
    free(ikey);
  }
  free(ca);
  free(ca_key);
  return 0;
}
