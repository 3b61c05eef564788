/* socket_outsider — an outsider (no secret, no store) at a wsync member's TCP ports, from any host
 * that reaches them:
 *
 *   socket_outsider crash <host> <port[,port...]> <attempts>
 *       every attempt is a fresh process that connects to one of the ports (in turn), sends what an
 *       attacker would (nothing; random bytes, up to 300 KB; a forged handshake HELLO of wsync's
 *       tcp transport with a random proof; a forged data chunk header followed by bytes; each in
 *       turn) and is SIGKILLed 0-40 ms after it started (random), mid-send: the recipe that made
 *       UCX's TCP transport abort its victims.
 *   socket_outsider silent <host> <port> <count>
 *       opens <count> connections at once and holds them, saying nothing, until it is killed (a
 *       flood of silent connections: they must cost the victim bounded memory and no member's time).
 *
 * Prints one line "outsider: ..." saying what it did (attempts made, how many connected). Exit 0
 * unless it could not run (2). Whether the victim survived is the test's to check. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int dial(const char* host, const char* port) {
  struct addrinfo hints, *res = NULL;
  int fd;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &res) != 0 || res == NULL) return -1;
  fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

static void random_bytes(uint8_t* p, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (uint8_t)rand();
}

/* The child: connect, then send what `kind` says until killed. Exit 0 when it connected. */
static void attempt(const char* host, const char* port, int kind, int told) {
  static uint8_t buf[300 * 1024];
  int fd = dial(host, port);
  size_t n;
  if (fd < 0) _exit(3);
  (void)!write(told, "c", 1); /* the parent counts connections that were made */
  switch (kind % 4) {
    case 0: /* nothing: hold the connection */
      pause();
      break;
    case 1: /* random bytes */
      n = (size_t)rand() % sizeof buf;
      random_bytes(buf, n);
      (void)!write(fd, buf, n);
      break;
    case 2: { /* a forged HELLO of transport 'tcp' (magic, a plausible rank and stream, a random proof) */
      uint8_t hello[96];
      uint8_t challenge[40];
      (void)!read(fd, challenge, sizeof challenge);
      random_bytes(hello, sizeof hello);
      memcpy(hello, "WSTCPhi1", 8);
      hello[8] = 1;
      hello[9] = hello[10] = hello[11] = 0;
      memset(hello + 12, 0, 8);
      hello[16] = 1;
      (void)!write(fd, hello, sizeof hello);
      break;
    }
    default: { /* a forged data chunk header, then bytes */
      uint8_t h[40];
      memset(h, 0, sizeof h);
      memcpy(h, "WSTD", 4);
      h[24] = 0x10; /* len 4 KiB */
      h[33] = 0x10; /* total 1 MiB */
      (void)!write(fd, h, sizeof h);
      n = (size_t)rand() % sizeof buf;
      random_bytes(buf, n);
      (void)!write(fd, buf, n);
      break;
    }
  }
  pause();
  _exit(0);
}

static int crash(const char* host, char* ports, int attempts) {
  char* list[64];
  int nports = 0, i, connected = 0;
  char* save = NULL;
  for (char* p = strtok_r(ports, ",", &save); p != NULL && nports < 64; p = strtok_r(NULL, ",", &save)) list[nports++] = p;
  if (nports == 0) {
    printf("outsider: no port to attack\n");
    return 0;
  }
  for (i = 0; i < attempts; ++i) {
    const int delay_us = rand() % 40000;
    int status = 0, fds[2];
    char c;
    pid_t pid;
    if (pipe2(fds, O_NONBLOCK) != 0) return 2;
    pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      srand((unsigned)(getpid() ^ time(NULL)));
      attempt(host, list[i % nports], i, fds[1]);
    }
    usleep((useconds_t)delay_us);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (read(fds[0], &c, 1) == 1) ++connected;
    close(fds[0]);
    close(fds[1]);
  }
  printf("outsider: crash: %d attempt(s) at %s port(s) %d, %d connected, each killed 0-40 ms in\n", attempts, host,
         nports, connected);
  return 0;
}

static int silent(const char* host, const char* port, int count) {
  int i, connected = 0;
  for (i = 0; i < count; ++i)
    if (dial(host, port) >= 0) ++connected;
  printf("outsider: silent: %d of %d connection(s) to %s port %s open and silent\n", connected, count, host, port);
  fflush(stdout);
  pause();
  return 0;
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  srand((unsigned)(getpid() ^ time(NULL)));
  if (argc == 5 && strcmp(argv[1], "crash") == 0) return crash(argv[2], argv[3], atoi(argv[4]));
  if (argc == 5 && strcmp(argv[1], "silent") == 0) return silent(argv[2], argv[3], atoi(argv[4]));
  fprintf(stderr, "usage: socket_outsider crash <host> <port[,port...]> <attempts>\n"
                  "       socket_outsider silent <host> <port> <count>\n");
  return 2;
}
