#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "agent/model/pod.h"
#include "fixture.h"

static nl_pod_t *load(const char *name, bool defaults) {
  size_t len = 0;
  char *data = fixture_read(name, &len);
  assert_non_null(data);
  nl_pod_t *pod = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(data, len, name, &pod, &err) < 0) fail_msg("%s", nl_err_msg(err));
  free(data);
  if (defaults) nl_pod_set_defaults(pod);
  if (nl_pod_validate(pod, name, &err) < 0 && defaults) fail_msg("%s", nl_err_msg(err));
  nl_err_free(&err);
  return pod;
}

static char *q(const nl_quantity_t *x, char *buf) { return nl_quantity_format(x, buf); }

static void nginx_decodes(void **state) {
  nl_pod_t *p = load("nginx.yaml", false);
  char b[NL_QUANTITY_STRLEN];
  assert_string_equal(p->metadata.name, "web");
  assert_null(p->metadata.namespace_);
  assert_int_equal(p->metadata.labels.n, 2);
  assert_string_equal(p->metadata.labels.items[0].key, "app"); /* sorted */
  assert_string_equal(nl_kvlist_get(&p->metadata.labels, "tier"), "frontend");
  assert_string_equal(nl_kvlist_get(&p->metadata.annotations, "example.com/owner"), "ops team");
  assert_int_equal(p->spec.n_containers, 1);
  nl_container_t *c = &p->spec.containers[0];
  assert_string_equal(c->name, "nginx");
  assert_string_equal(c->image, "nginx:1.25");
  assert_int_equal(c->n_ports, 2);
  assert_string_equal(c->ports[0].name, "http");
  assert_int_equal(c->ports[0].container_port, 80);
  assert_null(c->ports[0].protocol);
  assert_int_equal(c->ports[1].host_port, 8443);
  assert_string_equal(q(nl_resource_list_get(&c->resources.requests, "cpu"), b), "100m");
  assert_string_equal(q(nl_resource_list_get(&c->resources.limits, "memory"), b), "128Mi");
  assert_non_null(c->liveness_probe);
  nl_http_get_action_t *h = c->liveness_probe->handler.http_get;
  assert_non_null(h);
  assert_string_equal(h->path, "/healthz");
  assert_true(h->port.set && h->port.is_str);
  assert_string_equal(h->port.str, "http");
  assert_int_equal(h->n_headers, 1);
  assert_string_equal(h->headers[0].key, "X-Probe");
  assert_int_equal(c->liveness_probe->initial_delay_seconds, 5);
  assert_int_equal(c->liveness_probe->timeout_seconds, 0); /* not defaulted yet */
  assert_int_equal(c->readiness_probe->handler.tcp_socket->port.num, 80);
  assert_false(c->readiness_probe->handler.tcp_socket->port.is_str);
  assert_int_equal(c->startup_probe->handler.exec->command.n, 2);
  assert_string_equal(c->lifecycle->pre_stop->exec->command.items[2], "quit");
  assert_null(c->lifecycle->post_start);
  assert_true(c->volume_mounts[0].read_only);
  assert_string_equal(p->spec.volumes[0].host_path->type, "Directory");
  nl_pod_free(p);
}

static void defaults_apply(void **state) {
  nl_pod_t *p = load("nginx.yaml", true);
  nl_container_t *c = &p->spec.containers[0];
  assert_string_equal(p->spec.restart_policy, "Always");
  assert_string_equal(p->spec.dns_policy, "ClusterFirst");
  assert_true(p->spec.termination_grace_period_seconds.set);
  assert_int_equal(p->spec.termination_grace_period_seconds.v, 30);
  assert_string_equal(c->image_pull_policy, "IfNotPresent");
  assert_string_equal(c->ports[0].protocol, "TCP");
  assert_string_equal(c->termination_message_path, "/dev/termination-log");
  assert_string_equal(c->termination_message_policy, "File");
  assert_int_equal(c->liveness_probe->timeout_seconds, 1);
  assert_int_equal(c->liveness_probe->period_seconds, 15);
  assert_int_equal(c->liveness_probe->success_threshold, 1);
  assert_int_equal(c->liveness_probe->failure_threshold, 3);
  assert_string_equal(c->liveness_probe->handler.http_get->scheme, "HTTP");
  nl_pod_free(p);

  p = load("init-sidecar.yaml", true);
  assert_string_equal(p->spec.init_containers[0].image_pull_policy, "IfNotPresent"); /* digest */
  assert_string_equal(p->spec.init_containers[1].image_pull_policy, "Always");       /* no tag */
  assert_string_equal(p->spec.containers[0].image_pull_policy, "Always");            /* :latest */
  assert_string_equal(p->spec.restart_policy, "OnFailure");
  assert_int_equal(p->spec.termination_grace_period_seconds.v, 10);
  nl_pod_free(p);
}

static void init_and_sidecar(void **state) {
  nl_pod_t *p = load("init-sidecar.yaml", true);
  assert_string_equal(p->metadata.namespace_, "edge");
  assert_int_equal(p->spec.n_init_containers, 2);
  assert_null(p->spec.init_containers[0].restart_policy);
  assert_string_equal(p->spec.init_containers[1].restart_policy, "Always");
  assert_int_equal(p->spec.init_containers[1].readiness_probe->handler.grpc->port, 2020);
  nl_container_t *c = &p->spec.containers[0];
  assert_true(c->stdin_ && c->tty);
  assert_string_equal(c->working_dir, "/srv");
  assert_int_equal(c->security_context->run_as_user.v, 1000);
  assert_int_equal(c->security_context->run_as_non_root, 1);
  assert_int_equal(c->security_context->allow_privilege_escalation, 0);
  assert_int_equal(c->security_context->privileged, NL_UNSET);
  assert_string_equal(c->security_context->capabilities->drop.items[0], "ALL");
  assert_non_null(p->spec.volumes[0].empty_dir);
  nl_pod_free(p);
}

static void env_sources(void **state) {
  nl_pod_t *p = load("env-fieldref.yaml", true);
  nl_container_t *c = &p->spec.containers[0];
  char b[NL_QUANTITY_STRLEN];
  assert_int_equal(c->n_env_from, 2);
  assert_string_equal(c->env_from[0].prefix, "CFG_");
  assert_string_equal(c->env_from[0].config_map_ref->name, "app-config");
  assert_int_equal(c->env_from[1].secret_ref->optional, 1);
  assert_int_equal(c->n_env, 8);
  assert_string_equal(c->env[0].value, "hello");
  assert_non_null(c->env[1].value);
  assert_string_equal(c->env[1].value, ""); /* empty, not absent */
  assert_string_equal(c->env[2].value_from->field_ref->field_path, "metadata.name");
  assert_string_equal(c->env[2].value_from->field_ref->api_version, "v1"); /* defaulted */
  assert_string_equal(c->env[4].value_from->field_ref->field_path, "metadata.labels['app']");
  nl_resource_field_ref_t *r = c->env[5].value_from->resource_field_ref;
  assert_string_equal(r->resource, "limits.cpu");
  assert_true(r->has_divisor);
  assert_string_equal(q(&r->divisor, b), "1m");
  assert_string_equal(c->env[6].value_from->config_map_key_ref->key, "log.level");
  assert_int_equal(c->env[7].value_from->secret_key_ref->optional, 0);
  /* requests default to limits */
  assert_string_equal(q(nl_resource_list_get(&c->resources.requests, "memory"), b), "32Mi");
  nl_pod_free(p);
}

static void every_volume_kind(void **state) {
  nl_pod_t *p = load("volumes.yaml", true);
  char b[NL_QUANTITY_STRLEN];
  nl_volume_t *v = p->spec.volumes;
  assert_int_equal(p->spec.n_volumes, 10);
  assert_null(v[0].empty_dir->medium);
  assert_false(v[0].empty_dir->has_size_limit);
  assert_string_equal(v[1].empty_dir->medium, "Memory");
  assert_string_equal(q(&v[1].empty_dir->size_limit, b), "256Mi");
  assert_string_equal(v[2].host_path->path, "/var/lib/edge");
  assert_string_equal(v[2].host_path->type, "DirectoryOrCreate");
  assert_string_equal(v[3].config_map->name, "app-config");
  assert_int_equal(v[3].config_map->default_mode.v, 0440); /* YAML 1.1 octal */
  assert_int_equal(v[3].config_map->items[0].mode.v, 0400);
  assert_string_equal(v[4].secret->secret_name, "tls-certs");
  assert_int_equal(v[4].secret->default_mode.v, 0644); /* defaulted */
  assert_int_equal(v[4].secret->optional, 1);
  nl_projected_source_t *pr = v[5].projected;
  assert_int_equal(pr->n_sources, 4);
  assert_string_equal(pr->sources[0].secret->secret_name, "mysecret");
  assert_string_equal(pr->sources[0].secret->items[0].path, "my-group/my-username");
  assert_string_equal(pr->sources[1].config_map->name, "myconfigmap");
  assert_string_equal(pr->sources[2].downward_api->items[0].field_ref->field_path, "metadata.labels");
  assert_int_equal(pr->sources[3].service_account_token->expiration_seconds, 7200);
  assert_int_equal(pr->default_mode.v, 0644);
  nl_downward_api_source_t *d = v[6].downward_api;
  assert_int_equal(d->n_items, 2);
  assert_string_equal(d->items[1].resource_field_ref->container_name, "main");
  assert_string_equal(v[7].persistent_volume_claim->claim_name, "data-claim");
  assert_true(v[7].persistent_volume_claim->read_only);
  assert_string_equal(v[8].image->reference, "example/tools:v1");
  assert_string_equal(v[8].image->pull_policy, "IfNotPresent"); /* defaulted from the tag */
  assert_string_equal(v[9].image->pull_policy, "Never");
  assert_string_equal(p->spec.containers[0].volume_mounts[8].sub_path, "bin");
  assert_string_equal(p->spec.containers[0].volume_mounts[2].mount_propagation, "HostToContainer");
  assert_string_equal(p->spec.containers[0].volume_mounts[4].sub_path, "tls");
  nl_pod_free(p);
}

static void every_quantity_form(void **state) {
  nl_pod_t *p = load("resources.yaml", true);
  nl_resource_requirements_t *r = &p->spec.containers[0].resources;
  char b[NL_QUANTITY_STRLEN];
  assert_string_equal(q(nl_resource_list_get(&r->requests, "cpu"), b), "500m");  /* 0.5 (a YAML float) */
  assert_string_equal(q(nl_resource_list_get(&r->requests, "memory"), b), "1e3"); /* as written */
  assert_string_equal(q(nl_resource_list_get(&r->requests, "ephemeral-storage"), b), "1G");
  assert_string_equal(q(nl_resource_list_get(&r->requests, "hugepages-2Mi"), b), "4Mi");
  assert_string_equal(q(nl_resource_list_get(&r->requests, "example.com/widget"), b), "2");
  assert_string_equal(q(nl_resource_list_get(&r->limits, "cpu"), b), "1500m");
  assert_string_equal(q(nl_resource_list_get(&r->limits, "memory"), b), "1536Mi");
  assert_int_equal(nl_quantity_milli_value(nl_resource_list_get(&r->limits, "cpu")), 1500);
  assert_string_equal(q(nl_resource_list_get(&p->spec.overhead, "cpu"), b), "10m");
  nl_pod_free(p);
}

static void yaml_and_json_agree(void **state) {
  nl_pod_t *y = load("nginx.yaml", true), *j = load("nginx.json", true);
  nl_buf_t a = NL_BUF_INIT, b = NL_BUF_INIT;
  nl_pod_encode_json(y, &a, 0);
  nl_pod_encode_json(j, &b, 0);
  assert_string_equal(a.data, b.data);
  assert_int_equal(nl_pod_hash(y), nl_pod_hash(j));
  assert_int_equal(nl_container_hash(&y->spec.containers[0]), nl_container_hash(&j->spec.containers[0]));
  nl_buf_free(&a);
  nl_buf_free(&b);
  nl_pod_free(y);
  nl_pod_free(j);
}

/* A container's restartPolicyRules, in order, through a copy too. */
static void restart_rules(void **state) {
  nl_pod_t *p = load("restart-rules.yaml", true);
  for (int copy = 0; copy < 2; copy++) {
    nl_pod_t *q = copy ? nl_pod_dup(p) : p;
    const nl_container_t *c = &q->spec.containers[0];
    assert_string_equal(c->restart_policy, "Never");
    assert_int_equal(c->n_restart_policy_rules, 2);
    assert_string_equal(c->restart_policy_rules[0].action, "Restart");
    assert_true(c->restart_policy_rules[0].has_exit_codes);
    assert_string_equal(c->restart_policy_rules[0].operator_, "In");
    assert_int_equal(c->restart_policy_rules[0].n_values, 2);
    assert_int_equal(c->restart_policy_rules[0].values[1], 43);
    assert_string_equal(c->restart_policy_rules[1].operator_, "NotIn");
    assert_string_equal(q->spec.init_containers[0].restart_policy, "OnFailure");
    assert_null(q->spec.containers[1].restart_policy);
    /* the first matching rule decides: Restart for 43; RestartAllContainers
     * for 1, which starts it again with the others */
    assert_true(nl_container_should_restart(&q->spec, c, 43));
    assert_false(nl_container_restarts_all(c, 43));
    assert_true(nl_container_should_restart(&q->spec, c, 1));
    assert_true(nl_container_restarts_all(c, 1));
    assert_false(nl_container_should_restart(&q->spec, c, 0));
    assert_false(nl_container_restarts_all(c, 0));
    assert_true(nl_container_restartable(&q->spec, c));
    assert_true(nl_pod_has_restart_all_rule(&q->spec));
    if (copy) nl_pod_free(q);
  }
  nl_pod_free(p);
}

/* Encoding then decoding gives the same pod, for every fixture. */
static void round_trips(void **state) {
  const char *names[] = {"nginx.yaml", "init-sidecar.yaml", "env-fieldref.yaml", "volumes.yaml",
                         "resources.yaml", "restart-rules.yaml"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    nl_pod_t *p = load(names[i], true);
    nl_buf_t a = NL_BUF_INIT, b = NL_BUF_INIT;
    nl_pod_encode_json(p, &a, NL_POD_JSON_PRETTY);
    nl_pod_t *back = NULL;
    nl_err_t *err = NULL;
    if (nl_pod_decode(a.data, a.len, "encoded", &back, &err) < 0) fail_msg("%s", nl_err_msg(err));
    nl_pod_encode_json(back, &b, NL_POD_JSON_PRETTY);
    assert_string_equal(a.data, b.data);
    nl_pod_t *d = nl_pod_dup(p);
    assert_int_equal(nl_pod_hash(d), nl_pod_hash(p));
    nl_pod_free(d);
    nl_pod_free(back);
    nl_pod_free(p);
    nl_buf_free(&a);
    nl_buf_free(&b);
  }
}

static void yaml_scalars(void **state) {
  /* YAML 1.1: yes is a boolean, quoted stays a string, 0x10 an int */
  const char *y = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  hostNetwork: yes\n"
                  "  containers:\n  - name: c\n    image: \"123\"\n    ports: [{containerPort: 0x10}]\n"
                  "    stdin: off\n";
  nl_pod_t *p = NULL;
  nl_err_t *err = NULL;
  if (nl_pod_decode(y, strlen(y), "s.yaml", &p, &err) < 0) fail_msg("%s", nl_err_msg(err));
  assert_true(p->spec.host_network);
  assert_string_equal(p->spec.containers[0].image, "123");
  assert_int_equal(p->spec.containers[0].ports[0].container_port, 16);
  assert_false(p->spec.containers[0].stdin_);
  nl_pod_free(p);
  /* unknown fields are ignored; null leaves a field unset */
  const char *j = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"status\":{\"phase\":\"Running\"},"
                  "\"metadata\":{\"name\":\"x\",\"uid\":null,\"weird\":[1,2]},"
                  "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\\u00e9\\n\","
                  "\"livenessProbe\":null,\"futureField\":{}}]}}";
  assert_int_equal(nl_pod_decode(j, strlen(j), "j.json", &p, &err), 0);
  assert_null(p->metadata.uid);
  assert_null(p->spec.containers[0].liveness_probe);
  assert_string_equal(p->spec.containers[0].image, "i\xc3\xa9\n");
  nl_pod_free(p);
}

static void lists(void **state) {
  const char *l = "{\"apiVersion\":\"v1\",\"kind\":\"PodList\",\"items\":["
                  "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}},"
                  "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}]}";
  nl_pod_t **pods = NULL;
  size_t n = 0;
  nl_err_t *err = NULL;
  assert_int_equal(nl_pod_decode_list(l, strlen(l), "u", &pods, &n, &err), 0);
  assert_int_equal(n, 2);
  assert_string_equal(pods[1]->metadata.name, "b");
  for (size_t i = 0; i < n; i++) nl_pod_free(pods[i]);
  free(pods);
  /* a PodList is not a Pod */
  nl_pod_t *p = NULL;
  assert_int_equal(nl_pod_decode(l, strlen(l), "u", &p, &err), -1);
  assert_non_null(strstr(nl_err_msg(err), "u: kind: must be Pod, got PodList"));
  nl_err_free(&err);
  /* first YAML document only, as upstream */
  const char *two = "apiVersion: v1\nkind: Pod\nmetadata: {name: one}\n---\nkind: Pod\nmetadata: {name: two}\n";
  assert_int_equal(nl_pod_decode(two, strlen(two), "t", &p, &err), 0);
  assert_string_equal(p->metadata.name, "one");
  nl_pod_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nginx_decodes),      cmocka_unit_test(defaults_apply),
      cmocka_unit_test(init_and_sidecar),   cmocka_unit_test(env_sources),
      cmocka_unit_test(every_volume_kind),  cmocka_unit_test(every_quantity_form),
      cmocka_unit_test(yaml_and_json_agree), cmocka_unit_test(round_trips), cmocka_unit_test(restart_rules),
      cmocka_unit_test(yaml_scalars),       cmocka_unit_test(lists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
