/* Registry credentials from image pull secrets (upstream
 * pkg/credentialprovider: BasicDockerKeyring and the secrets' docker configs).
 *
 * A keyring holds (registry key, username, password) entries. A key is the
 * registry of a docker config entry without its scheme and with "/v1/" or
 * "/v2/" dropped: a host with an optional port ("*.example.com",
 * "127.0.0.1:5000") and an optional path prefix ("reg.example.com/team"). Lookups
 * return every matching credential, the most specific key first (keys in
 * reverse string order, as upstream), so that the puller can try each in
 * turn. */
#ifndef NL_KEYRING_H
#define NL_KEYRING_H

#include <stdbool.h>
#include <stddef.h>

#include "reactor/error.h"

/* The secret types and keys (core/v1 SecretTypeDockerConfigJson ...). */
#define NL_SECRET_TYPE_DOCKER_CONFIG_JSON "kubernetes.io/dockerconfigjson"
#define NL_SECRET_KEY_DOCKER_CONFIG_JSON ".dockerconfigjson"
#define NL_SECRET_TYPE_DOCKERCFG "kubernetes.io/dockercfg"
#define NL_SECRET_KEY_DOCKERCFG ".dockercfg"

typedef struct nl_keyring_cred {
  char *username;
  char *password;
} nl_keyring_cred_t;

struct nl_keyring_entry;

/* Owns its entries; zero-initialised is an empty keyring. */
typedef struct nl_keyring {
  struct nl_keyring_entry *entries; /* sorted, see above */
  size_t n;
} nl_keyring_t;

void nl_keyring_free(nl_keyring_t *k);

/* Adds the entries of a docker config: a .dockerconfigjson
 * ({"auths": {REGISTRY: ENTRY}}) when config_json, else a .dockercfg
 * ({REGISTRY: ENTRY}). An ENTRY has username, password and email, or auth
 * (base64 of "username:password", which wins). Field names match in any case,
 * as Go's encoding/json does. Returns 0, or -1 with *err (the JSON is
 * malformed, a field has the wrong type, an auth is not base64(user:pass)),
 * and then adds nothing. A registry that is not a valid URL is skipped with a
 * warning, as upstream does. */
int nl_keyring_add(nl_keyring_t *k, const char *data, size_t len, bool config_json,
                   nl_err_t **err);

/* Adds one credential under registry (a docker config's registry: a URL with
 * or without scheme, globs allowed in the host), as nl_keyring_add adds each
 * entry. -1 when registry is not a valid URL (nothing added). */
int nl_keyring_add_cred(nl_keyring_t *k, const char *registry, const char *username,
                        const char *password);

/* URLsMatchStr(glob, target): the matching rule of nl_keyring_lookup, for the
 * credential providers' matchImages. */
bool nl_keyring_urls_match(const char *glob, const char *target);

/* The repository an image pulls from, as upstream's ParseImageName normalises
 * it for the lookup: no tag or digest, "docker.io/library/" added to short
 * names ("busybox" -> "docker.io/library/busybox"). A new string, or NULL when
 * image is empty. */
char *nl_keyring_repo(const char *image);

/* The credentials for image (a pull spec, normalised by nl_keyring_repo):
 * those of every matching key, most specific key first; failing any, those of
 * the default registry (index.docker.io) for a Docker Hub image. Returns their
 * number and a new array of borrowed pointers in *out (free the array only;
 * NULL when none). A key matches when its port equals the image's, its host
 * has as many dot-separated parts, each matching as a glob (filepath.Match),
 * and its path is a string prefix of the image's path. */
size_t nl_keyring_lookup(const nl_keyring_t *k, const char *image,
                         const nl_keyring_cred_t ***out);

#endif
