/* testwal.h -- what the journal writer's tests share: a scratch folder, files read
 * back, a clock, and fdatasync replaced by the test's own.
 *
 * The replacement: the wal's fdatasync calls bind at link time to this definition
 * (a program's own symbol wins over the C library's), which makes the real system
 * call and notes what the tests assert on: how many fsyncs ran, whether one ran on
 * the main (loop) thread, how much of the file's lines the completed ones covered
 * (its length without the NUL tail the wal reserves ahead of its lines), whether
 * one is in flight. A test can make it slow (to catch a caller that waits for it)
 * or fail (to see the error reach the wal's users), or hold it at a gate until the
 * test opens it. Counters are C11 atomics: the
 * syncer thread writes them, the test reads them. */
#ifndef OB_TESTWAL_H
#define OB_TESTWAL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log/ob_journal.h"
#include "log/ob_wal.h"
#include "test.h"

/* The length of the lines in the file open as fd, size bytes long: size without
 * its tail of NUL bytes (size itself when fd cannot be read). A line holds no NUL,
 * so that is where the first NUL is: found by bisection, a byte read at a time. */
static inline long long fd_lines_size(int fd, long long size) {
  long long lo = 0, hi = size; /* the first NUL is in [lo, hi] (hi: none) */
  while (lo < hi) {
    long long mid = lo + (hi - lo) / 2;
    char c;
    if (pread(fd, &c, 1, (off_t)mid) != 1)
      return size;
    if (c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static atomic_int sync_calls, sync_done, sync_in_flight, sync_on_main, sync_most_in_flight;
static atomic_int sync_delay_ms, sync_fail_errno;
/* A gate: while closed, an fsync waits at it until the test opens it (an fsync that
 * takes as long as the test says, with no clock). */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed;

static inline void sync_gate(int closed) {
  pthread_mutex_lock(&gate_mu);
  gate_closed = closed;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}
static atomic_llong sync_covered; /* the largest file size a successful fsync started on */
static pthread_t main_thread;

int fdatasync(int fd) {
  atomic_fetch_add(&sync_calls, 1);
  if (pthread_equal(pthread_self(), main_thread))
    atomic_store(&sync_on_main, 1);
  struct stat st;
  long long size = fstat(fd, &st) == 0 ? fd_lines_size(fd, (long long)st.st_size) : -1;
  int now = atomic_fetch_add(&sync_in_flight, 1) + 1;
  int most = atomic_load(&sync_most_in_flight);
  while (now > most && !atomic_compare_exchange_weak(&sync_most_in_flight, &most, now)) {
  }
  pthread_mutex_lock(&gate_mu);
  while (gate_closed)
    pthread_cond_wait(&gate_cv, &gate_mu);
  pthread_mutex_unlock(&gate_mu);
  int ms = atomic_load(&sync_delay_ms);
  if (ms)
    usleep((useconds_t)ms * 1000);
  int fail = atomic_load(&sync_fail_errno);
  int rc = fail ? -1 : (int)syscall(SYS_fdatasync, fd);
  if (rc == 0) {
    long long had = atomic_load(&sync_covered);
    while (size > had && !atomic_compare_exchange_weak(&sync_covered, &had, size)) {
    }
  }
  atomic_fetch_sub(&sync_in_flight, 1);
  atomic_fetch_add(&sync_done, 1);
  if (fail)
    errno = fail;
  return rc;
}

/* Call first in main: the thread fsyncs must never run on. */
static inline void sync_reset(void) {
  main_thread = pthread_self();
  atomic_store(&sync_calls, 0);
  atomic_store(&sync_done, 0);
  atomic_store(&sync_in_flight, 0);
  atomic_store(&sync_on_main, 0);
  atomic_store(&sync_delay_ms, 0);
  atomic_store(&sync_fail_errno, 0);
  atomic_store(&sync_covered, 0);
  atomic_store(&sync_most_in_flight, 0);
}

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

static char scratch[64];

static inline void scratch_make(const char *name) {
  snprintf(scratch, sizeof scratch, "/tmp/obelus-%s-XXXXXX", name);
  if (!mkdtemp(scratch))
    abort();
}

/* A path in the scratch folder (four at a time). */
static inline const char *in_scratch(const char *name) {
  static char path[4][384];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", scratch, name);
  return path[k];
}

static inline void scratch_remove(void) {
  DIR *d = opendir(scratch);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlink(in_scratch(e->d_name));
  if (d)
    closedir(d);
  rmdir(scratch);
}

/* The whole file as a malloc'ed string (NULL when unreadable). */
static inline char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  ob_buf b;
  ob_buf_init(&b);
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    ob_buf_add(&b, chunk, n);
  fclose(f);
  if (len)
    *len = b.len;
  return b.data ? b.data : strdup("");
}

static inline void spit(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(text, 1, len, f) != len)
    abort();
  fclose(f);
}

static inline long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* The file's length without its NUL tail: where its lines end (-1: no file). */
static inline long long lines_size(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  long long size = fd >= 0 && fstat(fd, &st) == 0 ? fd_lines_size(fd, (long long)st.st_size) : -1;
  if (fd >= 0)
    close(fd);
  return size;
}

#endif
