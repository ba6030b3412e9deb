/* testredis.h -- a real redis-server for the C tests that need one: started on a free
 * loopback port in a temporary folder of its own (never the system's), stopped with
 * SIGKILL and its folder removed. One per test program (static state). */
#ifndef TESTREDIS_H
#define TESTREDIS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char redis_url[64], redis_dir[64]; /* url empty: the server did not start */
static int redis_port;
static pid_t redis_pid;

/* A loopback TCP port nobody listens on (at the moment it is asked). */
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  bind(s, (struct sockaddr *)&a, sizeof a);
  getsockname(s, (struct sockaddr *)&a, &len);
  int p = ntohs(a.sin_port);
  close(s);
  return p;
}

/* Starts the server (name: its folder's prefix) and waits until it answers a ping. */
static void start_redis(const char *name) {
  snprintf(redis_dir, sizeof redis_dir, "/tmp/obelus-%s-XXXXXX", name);
  if (!mkdtemp(redis_dir))
    return;
  redis_port = free_port();
  char ports[16];
  snprintf(ports, sizeof ports, "%d", redis_port);
  redis_pid = fork();
  if (redis_pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
      _exit(127);
    execlp("redis-server", "redis-server", "--port", ports, "--bind", "127.0.0.1", "--dir",
           redis_dir, "--save", "", "--appendonly", "no", "--loglevel", "warning", (char *)NULL);
    _exit(127);
  }
  snprintf(redis_url, sizeof redis_url, "redis://127.0.0.1:%d", redis_port);
  char ping[128];
  snprintf(ping, sizeof ping, "redis-cli -p %d ping >/dev/null 2>&1", redis_port);
  for (int i = 0; i < 250 && system(ping) != 0; i++)
    usleep(20000);
}

static void stop_redis(void) {
  if (redis_pid > 0) {
    kill(redis_pid, SIGKILL);
    waitpid(redis_pid, NULL, 0);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", redis_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", redis_dir);
}

#endif
