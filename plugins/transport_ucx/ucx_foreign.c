/* ucx_foreign.c — messages from outside the group are dropped, not kept.
 *
 * A process that reaches a worker's TCP port without the group secret can still create a UCX
 * endpoint to it and send tagged messages: they can never match a receive (ucx_tags.c), so UCX
 * would keep them in its unexpected queue until the worker is destroyed, as much memory as the
 * outsider cares to send. Every progress of this plugin therefore takes out of that queue what
 * cannot be the group's and throws it away into a small scratch buffer (truncated: a rendezvous
 * message's bytes are never even fetched).
 *
 * What can be the group's: a receiver's tags are its base (random high 32 bits, low 32 bits zero)
 * plus a bucket number below 2^32, so a tag whose high half differs from the base's in any bit is
 * foreign; one probe per bit of the high half finds them all. A worker without a base (the sender:
 * it posts no receive) takes no tagged message at all. */
#include <string.h>

#include "ucx_transport.h"

enum { kDropPerCall = 256 }; /* bounds the time one progress spends here */

/* Receive the probed message into the scratch buffer, which nothing reads; UCX reports it
 * truncated, and a request still running (a rendezvous being refused) completes on its own. */
static void discard(ucx_transport_t* t, ucp_tag_message_h msg) {
  ucp_request_param_t p;
  void* req;
  memset(&p, 0, sizeof p);
  p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  p.datatype = ucp_dt_make_contig(1);
  req = ucp_tag_msg_recv_nbx(t->worker, t->scratch, sizeof t->scratch, msg, &p);
  if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
}

static void drop_matching(ucx_transport_t* t, ucp_tag_t value, ucp_tag_t mask, unsigned* budget) {
  ucp_tag_recv_info_t info;
  while (*budget > 0) {
    ucp_tag_message_h msg = ucp_tag_probe_nb(t->worker, value, mask, 1, &info);
    if (msg == NULL) return;
    discard(t, msg);
    --*budget;
    ++t->foreign_dropped;
    /* One line at the first drop and at every power of two after it: visible, never a flood. */
    if ((t->foreign_dropped & (t->foreign_dropped - 1)) == 0)
      wsp_log(WSYNC_LOG_WARN, "transport 'ucx': rank %u dropped %llu message(s) under tags no member of the group uses "
              "(last: tag 0x%016llx, %zu bytes); a process outside the group reached this worker", t->rank,
              (unsigned long long)t->foreign_dropped, (unsigned long long)info.sender_tag, info.length);
  }
}

void ucx_drop_foreign(ucx_transport_t* t) {
  unsigned budget = kDropPerCall;
  unsigned bit;
  if (t->tag_base == 0) {
    drop_matching(t, 0, 0, &budget);
    return;
  }
  for (bit = 32; bit < 64 && budget > 0; ++bit) {
    const ucp_tag_t m = (ucp_tag_t)1 << bit;
    drop_matching(t, ~t->tag_base & m, m, &budget);
  }
}
