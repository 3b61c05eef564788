/* tcp_events.c — waking whoever waits: the core (an eventfd it polls, plugin ABI 1.2) and the
 * plugin's own calls (t->cond). The threads bump a generation and write the eventfd under t->mu;
 * arm() drains the eventfd and tells the core "sleep" only when nothing happened since the last
 * wait or arm looked (t->seen_gen), under the same lock, so a wake-up is never lost. */
#include <errno.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "tcp_transport.h"

wsync_status_t tcp_events_open(tcp_transport_t* t) {
  t->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (t->event_fd < 0) return wsp_fail(WSYNC_ERR_IO, TCP_LABEL ": eventfd failed (errno %d)", errno);
  return WSYNC_OK;
}

void tcp_events_close(tcp_transport_t* t) {
  if (t->event_fd >= 0) close(t->event_fd);
  t->event_fd = -1;
}

void tcp_signal(tcp_transport_t* t) {
  uint64_t one = 1;
  t->gen++;
  pthread_cond_broadcast(&t->cond);
  if (t->event_fd >= 0) (void)!write(t->event_fd, &one, sizeof one);
}

int tcp_wait_until(tcp_transport_t* t, int64_t deadline_ms) {
  struct timespec ts;
  int64_t now = wsp_now_ms();
  if (now >= deadline_ms) return ETIMEDOUT;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  {
    const int64_t left = deadline_ms - now;
    ts.tv_sec += (time_t)(left / 1000);
    ts.tv_nsec += (long)(left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec += 1;
      ts.tv_nsec -= 1000000000L;
    }
  }
  return pthread_cond_timedwait(&t->cond, &t->mu, &ts) == ETIMEDOUT && wsp_now_ms() >= deadline_ms ? ETIMEDOUT : 0;
}

wsync_status_t tcp_get_event_fd(void* self, int32_t* fd) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  if (t == NULL || fd == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": get_event_fd: NULL argument");
  *fd = t->event_fd;
  return WSYNC_OK;
}

wsync_status_t tcp_arm(void* self, int32_t* armed) {
  tcp_transport_t* t = (tcp_transport_t*)self;
  uint64_t v;
  if (t == NULL || armed == NULL) return wsp_fail(WSYNC_ERR_INVALID_ARGUMENT, TCP_LABEL ": arm: NULL argument");
  pthread_mutex_lock(&t->mu);
  while (read(t->event_fd, &v, sizeof v) > 0) {
  }
  if (t->gen != t->seen_gen || atomic_load(&t->aborted)) {
    /* Something happened since the last look: the caller looks again (once; the next arm sleeps
     * unless something happens meanwhile). Instances nobody waits on (a relay's world between
     * updates) must not make the caller spin. */
    t->seen_gen = t->gen;
    *armed = 0;
  } else {
    *armed = 1;
  }
  pthread_mutex_unlock(&t->mu);
  return WSYNC_OK;
}
