/* Image credential provider plugins (upstream pkg/credentialprovider/plugin):
 * --image-credential-provider-config names a CredentialProviderConfig (a file,
 * or a directory of *.json, *.yaml, *.yml files merged in name order), whose
 * providers are executables in --image-credential-provider-bin-dir. For an
 * image a provider's matchImages match, the kubelet runs the provider with a
 * CredentialProviderRequest on its stdin and reads a CredentialProviderResponse
 * from its stdout: registry credentials, cached for the response's
 * cacheDuration (else the provider's defaultCacheDuration) under the image, its
 * registry or one global key as the response's cacheKeyType says.
 *
 * The plugins run as child processes of the loop (uv_spawn), each with
 * upstream's 1-minute limit, after which it is killed. Concurrent lookups of one
 * image by one provider share one run (upstream's singleflight). What a plugin
 * writes is outside input: its stdout is read up to NL_CREDPROV_MAX_OUTPUT and
 * parsed strictly; a failure is an error of that provider for that pull, never
 * of the agent. The process must ignore SIGPIPE (main.c does): a plugin may exit
 * before it reads its request. */
#ifndef NL_CREDPROV_H
#define NL_CREDPROV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "managers/keyring.h"
#include "reactor/error.h"
#include "reactor/list.h"

#define NL_CREDPROV_API_V1 "credentialprovider.kubelet.k8s.io/v1"
#define NL_CREDPROV_MAX_OUTPUT (1 << 20)
#define NL_CREDPROV_TIMEOUT_MS (60 * 1000)

/* ---- the configuration (pure: no I/O) ------------------------------------- */

typedef struct nl_credprov_provider {
  char *name;
  char **match_images;
  size_t n_match;
  int64_t default_cache_ns;
  char *api_version; /* credentialprovider.kubelet.k8s.io/v1, v1beta1 or v1alpha1 */
  char **args;
  size_t n_args;
  char **env; /* "NAME=value" */
  size_t n_env;
} nl_credprov_provider_t;

typedef struct nl_credprov_config {
  nl_credprov_provider_t *providers;
  size_t n;
  uint8_t hash[32]; /* sha256 over each file's length (big-endian u64) and bytes */
} nl_credprov_config_t;

/* Adds the providers of one file's text (JSON or YAML) to c, validated as
 * upstream validates them (kind CredentialProviderConfig of
 * kubelet.config.k8s.io/v1 (or v1beta1, v1alpha1); each provider's name,
 * matchImages, defaultCacheDuration and apiVersion; names unique over all
 * files). -1 with *err naming the file and the field; c is then unchanged.
 * tokenAttributes (service account tokens for plugins) is refused: nanolet
 * does not request them. */
int nl_credprov_config_add(nl_credprov_config_t *c, const char *file, const char *data, size_t len,
                           nl_err_t **err);
/* Reads path (a file or a directory, as above; blocking: at start-up) into c. */
int nl_credprov_config_load(nl_credprov_config_t *c, const char *path, nl_err_t **err);
void nl_credprov_config_free(nl_credprov_config_t *c);

/* The part of a CredentialProviderResponse nanolet uses. */
typedef enum { NL_CREDPROV_KEY_IMAGE, NL_CREDPROV_KEY_REGISTRY, NL_CREDPROV_KEY_GLOBAL } nl_credprov_keytype_t;

typedef struct nl_credprov_auth {
  char *match, *username, *password;
} nl_credprov_auth_t;

typedef struct nl_credprov_response {
  nl_credprov_keytype_t key_type;
  bool has_duration;
  int64_t duration_ns;
  nl_credprov_auth_t *auth;
  size_t n_auth;
} nl_credprov_response_t;

/* Parses a plugin's stdout: JSON, kind CredentialProviderResponse of
 * api_version, a known cacheKeyType. -1 with *err; the message never
 * contains the response's text (it may hold credentials). */
int nl_credprov_response_parse(nl_credprov_response_t *r, const char *api_version, const char *data,
                               size_t len, nl_err_t **err);
void nl_credprov_response_free(nl_credprov_response_t *r);

/* The request a plugin reads on stdin. A new string. */
char *nl_credprov_request_json(const char *api_version, const char *image);

/* The cache keys of an image (a repository, nl_keyring_repo's form) as upstream
 * keys them: the image itself, its registry (the part before the first '/'). */
char *nl_credprov_registry(const char *image);

/* ---- the plugins at run time ----------------------------------------------- */

struct nl_credprov_entry;
struct nl_credprov_run;

typedef struct nl_credprov {
  uv_loop_t *loop;
  nl_credprov_config_t config;
  char *bin_dir;
  struct nl_credprov_entry **cache; /* per provider: a list */
  nl_list_t runs;                   /* plugins running */
  nl_list_t lookups;                /* lookups waiting for runs */
  bool closing;
  void (*closed)(void *ctx);
  void *closed_ctx;
  /* A plugin ran: its name, seconds, and whether it failed (upstream's
   * kubelet_credential_provider_plugin_{duration,errors_total}). NULL: not
   * counted. */
  void (*observe)(void *ctx, const char *plugin, double seconds, bool failed);
  void *observe_ctx;
  uint64_t (*now_ms)(void *ctx); /* the cache's clock (ms); NULL: uv_now */
  void *now_ctx;
  uint64_t timeout_ms;   /* a run's limit; 0: NL_CREDPROV_TIMEOUT_MS (tests set less) */
  uint64_t runs_started; /* for tests */
} nl_credprov_t;

/* Takes the configuration (moved out of *config) and checks that each
 * provider's executable exists in bin_dir, as upstream does at start-up. */
int nl_credprov_init(nl_credprov_t *cp, uv_loop_t *loop, nl_credprov_config_t *config,
                     const char *bin_dir, nl_err_t **err);

/* Does any provider match image? */
bool nl_credprov_wants(const nl_credprov_t *cp, const char *image);

/* The credentials every matching provider has for image, in one keyring
 * (borrowed during the call; NULL when none). Called exactly once: from inside
 * nl_credprov_lookup when every matching provider's answer is cached, else
 * when the last plugin run ends (or nl_credprov_close). A provider that fails
 * is logged and left out, as upstream logs it and goes on. */
typedef void (*nl_credprov_cb)(const nl_keyring_t *k, void *ctx);

void nl_credprov_lookup(nl_credprov_t *cp, const char *image, nl_credprov_cb cb, void *ctx);

/* Kills the plugins, answers every lookup without credentials, and calls
 * closed(ctx) once every handle is closed. */
void nl_credprov_close(nl_credprov_t *cp, void (*closed)(void *ctx), void *ctx);
/* Frees what cp owns, after nl_credprov_close's callback (or when it was never
 * initialised: zeroed). */
void nl_credprov_free(nl_credprov_t *cp);

#endif
