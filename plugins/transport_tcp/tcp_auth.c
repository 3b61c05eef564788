/* tcp_auth.c — the handshake that admits a connection: the listener's CHALLENGE (a fresh nonce),
 * the connector's HELLO (who it is, its nonce, and HMAC-SHA-256 over both nonces and the world
 * under the key the core derived from the group secret: hint auth_key), the listener's WELCOME
 * (its own proof). A recorded exchange cannot be replayed (both nonces are fresh), a proof for one
 * world or rank never verifies for another, and the listener reveals nothing computed from the key
 * before the connector proved it. Every message has a fixed size. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "tcp_transport.h"

static const uint8_t kChallengeMagic[8] = {'W', 'S', 'T', 'C', 'P', 'c', 'h', '1'};
static const uint8_t kHelloMagic[8] = {'W', 'S', 'T', 'C', 'P', 'h', 'i', '1'};
static const uint8_t kWelcomeMagic[8] = {'W', 'S', 'T', 'C', 'P', 'w', 'e', '1'};

/* HMAC-SHA-256 from the system's libcrypto (OpenSSL 3 or 1.1, both export HMAC and EVP_sha256),
 * loaded at run time like the core's (src/common/auth.cpp): nothing of OpenSSL is linked. */
typedef unsigned char* (*hmac_fn)(const void* md, const void* key, int key_len, const unsigned char* d, size_t n,
                                  unsigned char* out, unsigned int* out_len);
static hmac_fn g_hmac;
static const void* (*g_sha256)(void);
static pthread_once_t g_crypto_once = PTHREAD_ONCE_INIT;

static void load_libcrypto(void) {
  const char* env = getenv("WSYNC_LIBCRYPTO");
  void* h = env != NULL && env[0] != '\0' ? dlopen(env, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (h == NULL && (env == NULL || env[0] == '\0')) {
    h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) h = dlopen("libcrypto.so.1.1", RTLD_NOW | RTLD_LOCAL);
  }
  if (h == NULL) return;
  *(void**)&g_hmac = dlsym(h, "HMAC");
  *(void**)&g_sha256 = dlsym(h, "EVP_sha256");
  if (g_hmac == NULL || g_sha256 == NULL) g_hmac = NULL;
}

int tcp_crypto_available(void) {
  pthread_once(&g_crypto_once, load_libcrypto);
  return g_hmac != NULL;
}

int tcp_random(void* buf, size_t n) {
  uint8_t* p = (uint8_t*)buf;
  size_t got = 0;
  int fd;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (got == n) return 0;
  fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC); /* getrandom() refused: the device */
  while (fd >= 0 && got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (fd >= 0) close(fd);
  return got == n ? 0 : -1;
}

/* Constant time: every byte is looked at, whatever differs first. */
static int differ(const uint8_t* a, const uint8_t* b, size_t n) {
  volatile uint8_t d = 0;
  size_t i;
  for (i = 0; i < n; ++i) d = (uint8_t)(d | (a[i] ^ b[i]));
  return d != 0;
}

static void put_u32(uint8_t* p, uint32_t v) {
  int i;
  for (i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t* p, uint64_t v) {
  int i;
  for (i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t* p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

/* HMAC(key, label, world, rank, stream, streams, instance, server nonce, client nonce), each field
 * fed as a u64 length and its bytes (as the core's proofs are), so boundaries are part of the MAC. */
static int proof(const tcp_transport_t* t, const char* label, const tcp_hello_t* h,
                 const uint8_t server_nonce[TCP_NONCE_BYTES], uint8_t out[TCP_MAC_BYTES]) {
  uint8_t msg[1024], num[8];
  size_t n = 0, world_len = strlen(t->world), label_len = strlen(label);
  unsigned int mac_len = 0;
  const struct {
    const void* p;
    size_t len;
  } fields[] = {{label, label_len}, {t->world, world_len}, {NULL, 4}, {NULL, 4}, {NULL, 4}, {NULL, 8},
                {server_nonce, TCP_NONCE_BYTES}, {h->nonce, TCP_NONCE_BYTES}};
  size_t i;
  if (world_len > 512 || label_len > 64) return -1;
  for (i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    const void* p = fields[i].p;
    put_u64(msg + n, fields[i].len);
    n += 8;
    if (i == 2) put_u32(num, h->rank);
    if (i == 3) put_u32(num, h->stream);
    if (i == 4) put_u32(num, h->streams);
    if (i == 5) put_u64(num, h->instance);
    if (p == NULL) p = num;
    memcpy(msg + n, p, fields[i].len);
    n += fields[i].len;
  }
  if (!tcp_crypto_available() || g_hmac(g_sha256(), t->key, TCP_KEY_BYTES, msg, n, out, &mac_len) == NULL ||
      mac_len != TCP_MAC_BYTES)
    return -1;
  return 0;
}

void tcp_challenge_encode(const uint8_t nonce[TCP_NONCE_BYTES], uint8_t out[TCP_CHALLENGE_BYTES]) {
  memcpy(out, kChallengeMagic, 8);
  memcpy(out + 8, nonce, TCP_NONCE_BYTES);
}

int tcp_challenge_decode(const uint8_t in[TCP_CHALLENGE_BYTES], uint8_t nonce[TCP_NONCE_BYTES]) {
  if (memcmp(in, kChallengeMagic, 8) != 0) return -1;
  memcpy(nonce, in + 8, TCP_NONCE_BYTES);
  return 0;
}

int tcp_hello_encode(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                     uint8_t out[TCP_HELLO_BYTES]) {
  memcpy(out, kHelloMagic, 8);
  put_u32(out + 8, h->rank);
  put_u32(out + 12, h->stream);
  put_u32(out + 16, h->streams);
  put_u32(out + 20, 0);
  put_u64(out + 24, h->instance);
  memcpy(out + 32, h->nonce, TCP_NONCE_BYTES);
  return proof(t, "wsync tcp hello", h, server_nonce, out + 64);
}

int tcp_hello_verify(const tcp_transport_t* t, const uint8_t in[TCP_HELLO_BYTES],
                     const uint8_t server_nonce[TCP_NONCE_BYTES], tcp_hello_t* h) {
  tcp_hello_t got;
  uint8_t expect[TCP_MAC_BYTES];
  if (memcmp(in, kHelloMagic, 8) != 0) return -1;
  got.rank = get_u32(in + 8);
  got.stream = get_u32(in + 12);
  got.streams = get_u32(in + 16);
  got.instance = get_u64(in + 24);
  memcpy(got.nonce, in + 32, TCP_NONCE_BYTES);
  if (proof(t, "wsync tcp hello", &got, server_nonce, expect) != 0) return -1;
  if (differ(expect, in + 64, TCP_MAC_BYTES)) return -1;
  *h = got; /* believed only now */
  return 0;
}

int tcp_welcome_encode(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                       uint8_t out[TCP_WELCOME_BYTES]) {
  memcpy(out, kWelcomeMagic, 8);
  return proof(t, "wsync tcp welcome", h, server_nonce, out + 8);
}

int tcp_welcome_verify(const tcp_transport_t* t, const tcp_hello_t* h, const uint8_t server_nonce[TCP_NONCE_BYTES],
                       const uint8_t in[TCP_WELCOME_BYTES]) {
  uint8_t expect[TCP_MAC_BYTES];
  if (memcmp(in, kWelcomeMagic, 8) != 0) return -1;
  if (proof(t, "wsync tcp welcome", h, server_nonce, expect) != 0) return -1;
  return differ(expect, in + 8, TCP_MAC_BYTES) ? -1 : 0;
}
