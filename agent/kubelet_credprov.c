/* The image credential provider plugins in the kubelet: configuration at
 * start-up, metrics, and the stop. */
#include "agent/kubelet_credprov.h"

#include "agent/kubelet_pods.h"
#include "reactor/digest.h"
#include "reactor/log.h"

int nl__kubelet_credprov_init(nl_kubelet_t *k, nl_err_t **err) {
  const nl_kubelet_config_t *cfg = k->cfg;
  const char *path = cfg->image_credential_provider_config;
  if (!path || !*path) {
    if (cfg->image_credential_provider_bin_dir && *cfg->image_credential_provider_bin_dir)
      nl_warn("--image-credential-provider-bin-dir is set without --image-credential-provider-config; "
              "no credential provider runs");
    return 0;
  }
  nl_credprov_config_t c = {0};
  if (nl_credprov_config_load(&c, path, err) < 0 ||
      nl_credprov_init(&k->credprov, k->loop, &c, cfg->image_credential_provider_bin_dir, err) < 0)
    return nl_err_wrap(err, "failed to register the image credential provider plugins");
  k->credprov.observe = nl_kmetrics_credprov_run;
  k->credprov.observe_ctx = &k->metrics;
  char hash[7 + 64 + 1] = "sha256:";
  nl_hex(k->credprov.config.hash, sizeof k->credprov.config.hash, hash + 7);
  nl_kmetrics_credprov_config(&k->metrics, hash);
  for (size_t i = 0; i < k->credprov.config.n; i++)
    nl_info("image credential provider %s registered (%s)", k->credprov.config.providers[i].name,
            k->credprov.config.providers[i].api_version);
  k->credprov_up = true;
  return 0;
}

static void closed(void *ctx) {
  nl_kubelet_t *k = ctx;
  nl_credprov_free(&k->credprov);
  k->credprov_up = false;
  nl__kubelet_release(k);
}

void nl__kubelet_credprov_stop(nl_kubelet_t *k) {
  if (!k->credprov_up) return;
  k->pending++;
  nl_credprov_close(&k->credprov, closed, k);
}
