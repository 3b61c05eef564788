/* ucx_tags.c — tags an outsider cannot guess. Each receiver draws a random 64-bit tag base when
 * it connects and publishes it with its worker address in the group's store (which only members
 * holding the group secret can read); bucket `seq` travels under tag base + seq with a full tag
 * mask. A peer that reached the receiver's worker without reading the store would have to guess
 * 64 random bits: its messages never match a posted receive, so no foreign byte lands in a bucket
 * (they wait in UCX's unexpected queue until the worker is destroyed). */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "ucx_transport.h"

wsync_status_t ucx_random_tag(uint64_t* tag) {
  size_t got = 0;
  while (got < sizeof *tag) {
    ssize_t n = getrandom((char*)tag + got, sizeof *tag - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return wsp_fail(WSYNC_ERR_IO, "transport 'ucx': no random bytes for the tag base: %s", strerror(errno));
    got += (size_t)n;
  }
  return WSYNC_OK;
}
