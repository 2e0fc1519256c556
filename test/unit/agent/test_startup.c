/* agent/startup.c: the node IP chosen when --node-ip is not given, the
 * check of one that is, and which mount holds the root directory. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/startup.h"

#define HEADER "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

static char *route_file(const char *body) {
  char *path = strdup("/tmp/nanolet-test-route.XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fprintf(f, HEADER "%s", body);
  fclose(f);
  return path;
}

static void test_override_ip(void **state) {
  (void)state;
  char *ip = nl_startup_node_ip("192.0.2.7", "/nonexistent");
  assert_string_equal(ip, "192.0.2.7");
  free(ip);
  ip = nl_startup_node_ip("2001:db8::1", "/nonexistent");
  assert_string_equal(ip, "2001:db8::1");
  free(ip);
}

static void test_no_default_route(void **state) {
  (void)state;
  char *path = route_file("eth9\t0000580A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
  assert_null(nl_startup_node_ip("node-a", path));
  assert_null(nl_startup_node_ip(NULL, "/nonexistent"));
  unlink(path);
  free(path);
}

static void test_loopback_is_not_a_node_ip(void **state) {
  (void)state;
  char *path = route_file("lo\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n");
  assert_null(nl_startup_node_ip("node-a", path));
  unlink(path);
  free(path);
}

/* The default route's interface (the lowest metric wins) gives its address. */
static void test_default_route_interface(void **state) {
  (void)state;
  struct ifaddrs *ifs, *i;
  assert_int_equal(getifaddrs(&ifs), 0);
  char name[64] = "", want[INET_ADDRSTRLEN] = "";
  for (i = ifs; i && !*name; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, "lo") == 0) continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, want, sizeof want);
    snprintf(name, sizeof name, "%s", i->ifa_name);
  }
  freeifaddrs(ifs);
  assert_true(*name); /* the test machine needs a non-loopback IPv4 interface */
  char body[512];
  snprintf(body, sizeof body,
           "lo\t00000000\t00000000\t0001\t0\t0\t200\t00000000\t0\t0\t0\n"
           "%s\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
           "lo\t00000000\t00000000\t0000\t0\t0\t0\t00000000\t0\t0\t0\n", /* not up */
           name);
  char *path = route_file(body);
  char *ip = nl_startup_node_ip("node-a", path);
  assert_non_null(ip);
  assert_string_equal(ip, want);
  free(ip);
  unlink(path);
  free(path);
}

/* A non-loopback IPv4 address of this host (the test machine has one). */
static void host_ip(char *out, size_t cap) {
  struct ifaddrs *ifs, *i;
  assert_int_equal(getifaddrs(&ifs), 0);
  *out = 0;
  for (i = ifs; i && !*out; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, "lo") == 0) continue;
    inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)cap);
  }
  freeifaddrs(ifs);
  assert_true(*out);
}

static void refused(const char *node_ip, const char *msg) {
  nl_err_t *err = NULL;
  assert_int_equal(nl_startup_check_node_ip(node_ip, &err), -1);
  assert_non_null(err);
  assert_string_equal(nl_err_msg(err), msg);
  nl_err_free(&err);
}

/* Upstream's reasons, word for word (pkg/kubelet/nodestatus/setters.go). */
static void test_node_ip_refused(void **state) {
  (void)state;
  refused("127.0.0.1", "failed to validate nodeIP: nodeIP can't be loopback address");
  refused("127.1.2.3", "failed to validate nodeIP: nodeIP can't be loopback address");
  refused("::1", "failed to validate nodeIP: nodeIP can't be loopback address");
  refused("::ffff:127.0.0.1", "failed to validate nodeIP: nodeIP can't be loopback address");
  refused("224.0.0.251", "failed to validate nodeIP: nodeIP can't be a multicast address");
  refused("239.0.0.254", "failed to validate nodeIP: nodeIP can't be a multicast address");
  refused("ff02::1", "failed to validate nodeIP: nodeIP can't be a multicast address");
  refused("169.254.0.1", "failed to validate nodeIP: nodeIP can't be a link-local unicast address");
  refused("fe80::1", "failed to validate nodeIP: nodeIP can't be a link-local unicast address");
  refused("203.0.113.77",
          "failed to validate nodeIP: node IP: \"203.0.113.77\" not found in the host's network "
          "interfaces");
  refused("2001:db8:0::7",
          "failed to validate nodeIP: node IP: \"2001:db8::7\" not found in the host's network "
          "interfaces");
  char ip[INET_ADDRSTRLEN], pair[128];
  host_ip(ip, sizeof ip);
  snprintf(pair, sizeof pair, "%s,::1", ip);
  refused(pair, "failed to validate secondaryNodeIP: nodeIP can't be loopback address");
  refused("banana", "bad --node-ip \"banana\": could not parse \"banana\"");
  snprintf(pair, sizeof pair, "%s,192.0.2.9", ip);
  char msg[256];
  snprintf(msg, sizeof msg,
           "bad --node-ip \"%s\": must contain either a single IP or a dual-stack pair of IPs", pair);
  refused(pair, msg);
  snprintf(pair, sizeof pair, "%s,2001:db8::1,2001:db8::2", ip);
  snprintf(msg, sizeof msg,
           "bad --node-ip \"%s\": must contain either a single IP or a dual-stack pair of IPs", pair);
  refused(pair, msg);
}

static void test_node_ip_accepted(void **state) {
  (void)state;
  nl_err_t *err = NULL;
  char ip[INET_ADDRSTRLEN], pair[128];
  host_ip(ip, sizeof ip);
  assert_int_equal(nl_startup_check_node_ip(ip, &err), 0);
  snprintf(pair, sizeof pair, " %s , ::", ip); /* :: chooses, as 0.0.0.0 */
  assert_int_equal(nl_startup_check_node_ip(pair, &err), 0);
  assert_int_equal(nl_startup_check_node_ip("0.0.0.0", &err), 0);
  assert_int_equal(nl_startup_check_node_ip("", &err), 0);
  assert_int_equal(nl_startup_check_node_ip(NULL, &err), 0);
  assert_null(err);
}

/* The mount holding a path is the last one whose mount point holds it; its
 * "shared:" peer group (not "master:", a slave's) makes it shared. */
static void test_path_shared(void **state) {
  (void)state;
  const char *info =
      "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
      "30 22 0:25 / /var/lib rw shared:5 - tmpfs tmpfs rw\n"
      "31 30 0:26 / /var/lib/private\\040dir rw - tmpfs tmpfs rw\n"
      "32 30 0:27 / /var/lib/slave rw master:5 - tmpfs tmpfs rw\n"
      "33 22 8:1 /srv /srv rw shared:7 master:2 - ext4 /dev/sda1 rw\n";
  assert_false(nl_startup_path_shared(info, "/"));
  assert_false(nl_startup_path_shared(info, "/var"));
  assert_true(nl_startup_path_shared(info, "/var/lib"));
  assert_true(nl_startup_path_shared(info, "/var/lib/kubelet/pods"));
  assert_false(nl_startup_path_shared(info, "/var/library")); /* not under /var/lib: / holds it */
  assert_false(nl_startup_path_shared(info, "/var/lib/private dir/x"));
  assert_true(nl_startup_path_shared(info, "/var/lib/private"));
  assert_false(nl_startup_path_shared(info, "/var/lib/slave/x"));
  assert_true(nl_startup_path_shared(info, "/srv/a"));
  assert_false(nl_startup_path_shared("", "/x"));
  assert_false(nl_startup_path_shared("garbage\n1 2\n", "/x"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_override_ip),
      cmocka_unit_test(test_path_shared),
      cmocka_unit_test(test_no_default_route),
      cmocka_unit_test(test_loopback_is_not_a_node_ip),
      cmocka_unit_test(test_default_route_interface),
      cmocka_unit_test(test_node_ip_refused),
      cmocka_unit_test(test_node_ip_accepted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
