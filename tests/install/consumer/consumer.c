/* Builds against an installed wsync and checks the library it loads is the ABI it compiled for. */
#include <stdio.h>
#include <wsync.h>

int main(void) {
  if ((wsync_abi_version() >> 16) != WSYNC_ABI_VERSION_MAJOR) {
    fprintf(stderr, "ABI major mismatch\n");
    return 1;
  }
  printf("consumer: wsync %s, ABI %u.%u\n", wsync_version_string(), wsync_abi_version() >> 16,
         wsync_abi_version() & 0xffffu);
  return 0;
}
