#include <stdio.h>
#include <uv.h>

int main(void) {
  printf("nanolet %s\n", NANOLET_VERSION);
  return 0;
}
