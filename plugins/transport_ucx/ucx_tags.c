/* ucx_tags.c — tags an outsider cannot guess. Each receiver draws a random tag base when it
 * connects and publishes it with its worker address in the group's store (which only members
 * holding the group secret can read); bucket `seq` travels under tag base + seq with a full tag
 * mask. The base is 32 random bits in the high half (never all zero) and zeros in the low half,
 * where the bucket number goes: a tag is the group's only if its high half equals the base's, so
 * everything else can be dropped at once (ucx_foreign.c). A peer that reached the receiver's
 * worker without reading the store would have to guess those 32 bits: its messages never match
 * a posted receive, so no foreign byte lands in a bucket, and they are dropped as they arrive. */
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
    if (got == sizeof *tag && (*tag & ~(uint64_t)UCX_MAX_SEQ) == 0) got = 0; /* high half all zero: again */
  }
  *tag &= ~(uint64_t)UCX_MAX_SEQ;
  return WSYNC_OK;
}
