/* tcp_transport.h — the state of one transport 'tcp' instance, shared by the plugin's files.
 *
 * transport 'tcp' is wsync's own socket transport for bytes between hosts that have no RDMA
 * (docs/PLUGINS.md "transport 'tcp'"). One instance is one world: rank 0 sends, ranks 1..W-1
 * receive. Rank 0 listens (on the address of the hint local_address) and publishes where in the
 * store; receivers connect to it, `streams` TCP connections each. Nobody else listens.
 *
 * Who may talk: every connection proves the group secret before the plugin parses or allocates
 * anything for it (tcp_auth.c). The listener's acceptor thread (tcp_listen.c) owns a fixed table
 * of handshakes in progress: a connection that does not prove the key within a few seconds, or
 * when the table is full and it is the oldest, is closed; its cost is one slot, never a member's
 * thread.
 *
 * The data path (tcp_send.c, tcp_recv.c): one writer thread per stream on the sender, one reader
 * thread per stream on a receiver, blocking sockets. A piece goes as chunks (one per stream; a
 * small piece on one stream), each a 40-byte header and the bytes, written with sendmsg straight
 * from the caller's memory and read with readv straight into the receiver's regions: no copy of
 * ours. The core waits on an eventfd (tcp_events.c) that the threads signal.
 *
 * Locks: one mutex per instance (t->mu) guards every list and flag below; a thread never holds it
 * while it reads or writes a socket. Stopping a thread: set its stream's `stop`, shutdown() its
 * socket (a blocked read or write returns at once), broadcast, join. */
#ifndef WSYNC_TCP_TRANSPORT_H_
#define WSYNC_TCP_TRANSPORT_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "plugin_util.h"
#include "wsync_plugin.h"

#define TCP_LABEL "transport 'tcp'"
#define TCP_MAX_STREAMS 16
#define TCP_KEY_BYTES 32
#define TCP_NONCE_BYTES 32
#define TCP_MAC_BYTES 32
#define TCP_HOST_TEXT 80 /* "[v6 address]:port" */

/* Why the acceptor closed a connection (tcp_listen.c counts and logs each). */
enum { TCP_REFUSED_PROOF, TCP_REFUSED_SLOW, TCP_REFUSED_CLOSED, TCP_REFUSED_FULL, TCP_REFUSED_RANK, TCP_REFUSALS };

typedef struct tcp_transport tcp_transport_t;
typedef struct tcp_peer tcp_peer_t;

/* Sender: one (seq, rank) send; complete when every chunk of it was written or failed. */
typedef struct tcp_send_op {
  struct tcp_send_op* next;
  uint64_t seq;
  uint32_t rank;
  uint32_t pending; /* chunks not yet written */
  wsync_status_t status;
  char why[320];
} tcp_send_op_t;

/* Sender: one chunk queued on a stream's writer. */
typedef struct tcp_chunk {
  struct tcp_chunk* next;
  tcp_send_op_t* op;
  uint64_t seq, offset, len, total;
  const uint8_t* data; /* the chunk's first byte */
} tcp_chunk_t;

/* One connection of a peer, and the thread that works it. */
typedef struct tcp_stream {
  tcp_peer_t* peer;
  uint32_t index;
  int fd;
  pthread_t thread;
  int started;
  int stop;                /* set under t->mu: the thread leaves */
  tcp_chunk_t *head, *tail; /* sender: its queue */
} tcp_stream_t;

struct tcp_peer {
  tcp_transport_t* owner;
  uint32_t rank;
  char host[TCP_HOST_TEXT];  /* where the active connection goes to / comes from */
  tcp_stream_t* streams;     /* [t->streams] while active, else NULL */
  int active;                /* its streams are connected and their threads run */
  int forgotten;             /* forget_peer: never wait for it again */
  wsync_status_t failed;     /* WSYNC_OK, or why its connection is unusable */
  char failed_why[320];
  /* Sender: the connections of the newest process that proved the key as this rank (from
   * tcp_listen.c), taken by connect / connect_peer. */
  int pending_fd[TCP_MAX_STREAMS];
  uint32_t pending_count;
  uint64_t pending_instance;
  char pending_host[TCP_HOST_TEXT];
};

/* Receiver: one posted receive. */
typedef struct tcp_recv_op {
  struct tcp_recv_op* next;
  uint64_t seq;
  uint64_t expected, received;
  wsync_iov_t* iov;  /* owned copy of the regions */
  uint64_t* starts;  /* byte offset of each region in the bucket */
  uint64_t num_iov;
  int users;         /* reader threads writing into it now */
  int arrived;       /* a chunk of it arrived */
  wsync_status_t status;
  char why[320];
} tcp_recv_op_t;

struct tcp_transport {
  uint32_t rank;
  uint32_t world_size;
  char* world;      /* the world's name (group_name): part of every proof, and of the store key */
  wsync_store_t* store;
  uint32_t streams; /* option streams (sender); the sender's published count (receiver) */
  int join_later;
  char local_address[256]; /* hint local_address, "" when none */
  uint8_t key[TCP_KEY_BYTES]; /* from hint auth_key */
  uint64_t instance;          /* random: tells this process's connections from an earlier one's */

  pthread_mutex_t mu;
  pthread_cond_t cond; /* any change below */
  tcp_peer_t* peers;   /* [world_size] */
  int connected;
  atomic_int aborted;

  /* sender */
  int listen_fd;
  char listen_text[512]; /* what was published: "addr,addr port" for messages */
  int wake_fd;           /* eventfd: wakes the acceptor to leave */
  pthread_t acceptor;
  int acceptor_started;
  int stopping;
  tcp_send_op_t* sends;
  uint64_t refused[TCP_REFUSALS]; /* connections closed without a proof, per reason (tcp_listen.c) */

  /* receiver */
  tcp_recv_op_t* recvs;
  uint64_t max_posted; /* highest seq ever posted + 1 (0: none) */

  /* tcp_events.c */
  int event_fd;
  uint64_t gen, seen_gen;
};

/* tcp_auth.c: the handshake. Wire sizes are fixed, so a slot holds one in full. */
#define TCP_CHALLENGE_BYTES 40 /* magic(8) nonce(32) */
#define TCP_HELLO_BYTES 96     /* magic(8) rank stream streams reserved(4 each) instance(8) nonce(32) proof(32) */
#define TCP_WELCOME_BYTES 40   /* magic(8) proof(32) */
typedef struct tcp_hello {
  uint32_t rank, stream, streams;
  uint64_t instance;
  uint8_t nonce[TCP_NONCE_BYTES];
} tcp_hello_t;
int tcp_random(void* buf, size_t n); /* 0, or -1 */
/* 1 when the system's libcrypto (HMAC-SHA-256) was loaded; loads it on the first call. */
int tcp_crypto_available(void);
void tcp_challenge_encode(const uint8_t nonce[TCP_NONCE_BYTES], uint8_t out[TCP_CHALLENGE_BYTES]);
int tcp_challenge_decode(const uint8_t in[TCP_CHALLENGE_BYTES], uint8_t nonce[TCP_NONCE_BYTES]);
/* The connector's HELLO, with its proof over the world, the fields and both nonces. */
int tcp_hello_encode(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                     uint8_t out[TCP_HELLO_BYTES]);
/* 0 when `in` is a HELLO whose proof verifies under t's key; only then is *h filled. */
int tcp_hello_verify(const tcp_transport_t* t, const uint8_t in[TCP_HELLO_BYTES],
                     const uint8_t server_nonce[TCP_NONCE_BYTES], tcp_hello_t* h);
int tcp_welcome_encode(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                       uint8_t out[TCP_WELCOME_BYTES]);
int tcp_welcome_verify(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                       const uint8_t in[TCP_WELCOME_BYTES]);

/* tcp_wire.c: chunk headers and whole reads and writes on blocking sockets. */
#define TCP_CHUNK_HEADER_BYTES 40 /* magic(4) reserved(4) seq offset len total (8 each) */
void tcp_chunk_header_encode(uint64_t seq, uint64_t offset, uint64_t len, uint64_t total,
                             uint8_t out[TCP_CHUNK_HEADER_BYTES]);
int tcp_chunk_header_decode(const uint8_t in[TCP_CHUNK_HEADER_BYTES], uint64_t* seq, uint64_t* offset, uint64_t* len,
                            uint64_t* total);
/* 0 when all of it went; else -1 with errno (EPIPE for a closed peer). */
int tcp_write_all(int fd, const void* head, size_t head_len, const void* data, uint64_t len);
/* 0 when all of it came; 1 at a clean end of stream before any byte; else -1 with errno (ECONNRESET
 * for an end in the middle). */
int tcp_read_all(int fd, void* buf, size_t len);
int tcp_readv_all(int fd, struct iovec* iov, int n);
/* Socket helpers: deadline-bounded I/O on non-blocking sockets (0, or -1 with errno, ETIMEDOUT). */
int tcp_set_blocking(int fd, int blocking);
void tcp_tune(int fd);
int tcp_io_deadline(int fd, void* buf, size_t len, int writing, int64_t deadline_ms);
void tcp_peer_text(int fd, char out[TCP_HOST_TEXT]);

/* tcp_listen.c (rank 0) */
wsync_status_t tcp_listen_start(tcp_transport_t* t);
void tcp_listen_stop(tcp_transport_t* t);

/* tcp_connect.c */
wsync_status_t tcp_connect(void* self, int64_t timeout_ms);
wsync_status_t tcp_connect_peer(void* self, uint32_t rank, int64_t timeout_ms);
/* Stop the threads of `p`'s streams, close them (t->mu held; released while joining). */
void tcp_peer_stop(tcp_transport_t* t, tcp_peer_t* p);
/* Mark `p` failed with `status` and `why` (first failure wins) and shut its sockets down so its
 * other threads stop too (t->mu held). */
void tcp_peer_fail(tcp_transport_t* t, tcp_peer_t* p, wsync_status_t status, const char* why);
/* The store key a world's rank 0 publishes its address under. */
void tcp_addr_key(const tcp_transport_t* t, char* out, size_t cap);

/* tcp_send.c */
wsync_status_t tcp_send_post(void* self, uint64_t seq, const wsync_buffer_t* buf, const uint32_t* ranks,
                             uint32_t num_ranks);
wsync_status_t tcp_send_wait(void* self, uint64_t seq, int64_t timeout_ms);
void tcp_forget_peer(void* self, uint32_t rank);
void* tcp_writer_main(void* arg);
/* Fail and drop every chunk queued on `s` (t->mu held). */
void tcp_drop_queue(tcp_transport_t* t, tcp_stream_t* s, const char* why);
void tcp_free_sends(tcp_transport_t* t);

/* tcp_recv.c */
wsync_status_t tcp_recv_post(void* self, uint64_t seq, const wsync_iov_t* iov, uint64_t num_iov);
wsync_status_t tcp_recv_wait(void* self, uint64_t seq, int64_t timeout_ms);
void* tcp_reader_main(void* arg);
void tcp_free_recvs(tcp_transport_t* t);

/* tcp_events.c */
wsync_status_t tcp_events_open(tcp_transport_t* t);
void tcp_events_close(tcp_transport_t* t);
/* Something finished or failed (t->mu held): waiters and the event fd wake. */
void tcp_signal(tcp_transport_t* t);
/* Wait on t->cond until `deadline_ms` (t->mu held); 0 when woken, ETIMEDOUT when the deadline passed. */
int tcp_wait_until(tcp_transport_t* t, int64_t deadline_ms);
wsync_status_t tcp_get_event_fd(void* self, int32_t* fd);
wsync_status_t tcp_arm(void* self, int32_t* armed);

#endif /* WSYNC_TCP_TRANSPORT_H_ */
