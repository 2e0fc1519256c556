/* agent/startup.c: the node IP chosen when --node-ip is not given. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_override_ip),
      cmocka_unit_test(test_no_default_route),
      cmocka_unit_test(test_loopback_is_not_a_node_ip),
      cmocka_unit_test(test_default_route_interface),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
