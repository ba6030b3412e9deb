/* ob_wal.c -- the journal writer: lines buffered on the loop thread, copied by each
 * flush into a shared mapping of the file (or written with one write(2) where the
 * file cannot be mapped), fsynced by a thread of the wal's own (design and costs in
 * ob_wal.h).
 *
 * The mapping. A regular file is grown ahead of its lines in chunks (1 MB, doubling
 * up to 64 MB): fallocate reserves the blocks first (a full disk or a size limit
 * fails the wal there, with the chunk retried at the exact size needed, and never
 * shows as a SIGBUS from a store into a hole), then the new part is mapped (one
 * mapping, grown with mremap). The file is then longer than its lines: zeros
 * follow them until ob_wal_close cuts the file back to its lines, and a reader of
 * a live or killed run's journal ignores that NUL tail (ob_journal_len). Where
 * fallocate is not supported or a mapping cannot be made (address space limits),
 * the wal cuts the zeros off and goes on with write(2), for good.
 *
 * Who owns what. The loop thread alone touches the buffer, the mapping (and grows,
 * cuts and unmaps the file), the counters of lines added and flushed (seq,
 * flushed), the waiters, and the wal's error. The syncer touches only the fd,
 * which outlives it (set before it starts, closed after it is joined). What they
 * share -- the last line handed to the kernel (written), the last one an fsync has
 * taken on (taken), the last one on disk (durable), the window's start, the fsync
 * count and error, stop, idle and the notifier -- is read and written under mu,
 * and nowhere else: one lock, no atomics to reason about, which is also what lets
 * ThreadSanitizer check it.
 *
 * Creating, replacing, locking (OB_WAL_CREATE; issue 26). A journal must never
 * destroy a file and never exist without its first record, so a regular file is
 * not opened where it goes: its lines go to a file aside in the same folder -- an
 * unnamed one (O_TMPFILE), or a hidden ".NAME.XXXXXX" where the file system has
 * none -- and the first flush that writes lines links it into place (linkat of
 * /proc/self/fd/N, or link(2)): link refuses an existing name, which is O_EXCL's
 * semantics without O_EXCL's empty file. A file that is already there is replaced
 * (a rename of the aside file over it) only when it was empty when opened and is
 * still that file, or with OB_WAL_OVERWRITE; until then it is held open and locked,
 * so that no other writer takes it meanwhile. A run that writes no line leaves no
 * file, and one killed before its first flush leaves none either (an unnamed file
 * goes with the process; a named one is left hidden, a dot file). Its first fsync
 * (the syncer's, never the loop thread's) covers the lines, then the folder: the
 * name is never durable before the lines it leads to. Every wal of a regular file
 * holds flock(LOCK_EX|LOCK_NB) on it from open to close (OB_WAL_APPEND before it
 * cuts anything): a second writer is refused, named by /proc/locks' pid; readers
 * take no lock. Costs: a link and, when replacing, a rename at the first flush;
 * one flock per open.
 *
 * The syncer's loop: sleep while everything written has been taken on; in BATCH,
 * then sleep until the window that the first un-synced flush opened ends (a close
 * ends it early); take on everything written so far; fdatasync (mu released);
 * publish durable, wake the loop if waiters wait; again. Lines flushed while an
 * fsync runs gather for the next one: that is the group commit, in both modes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "log/ob_wal.h"

/* A buffer grown past this by a burst is given back after its flush. */
#define KEEP_BUFFER (1u << 20)
/* The file grows ahead of its lines by FIRST_CHUNK, then by twice the last growth,
 * up to MAX_CHUNK at a time. */
#define FIRST_CHUNK (1u << 20)
#define MAX_CHUNK (64u << 20)

typedef struct waiter {
  uint64_t seq;
  ob_wal_durable_cb cb;
  void *ud;
} waiter;

/* The handle through which the syncer wakes the loop for waiters. Apart from the
 * wal: libuv keeps it until its close callback, which may come after w is freed. */
typedef struct notifier {
  uv_async_t h;
  ob_wal *w; /* NULL once the handle is closing */
} notifier;

struct ob_wal {
  uv_loop_t *loop;
  char *path;
  int fd;
  ob_fsync mode;
  unsigned window_ms; /* BATCH's window (OB_WAL_BATCH_MS; under mu) */
  int has_syncer;
  pthread_t syncer;

  /* the loop thread's */
  ob_buf buf;
  uint64_t seq, flushed;
  /* the mapping (map NULL: write(2)): the file's bytes [map_off, map_off + map_len)
   * are at map; lines end at `end`, the file (its reserved blocks) at `alloc` */
  char *map;
  size_t map_len, chunk;
  uint64_t map_off, end, alloc;
  int mappable; /* a regular file opened for reading too: try the mapping */
  int code; /* OB_OK, or the failure, for good */
  char error[640];
  int torn;
  ob_wal_cut cut;
  ob_wal_tee_fn tee;
  void *tee_ud;
  waiter *waiters;
  size_t nwaiters, capwaiters;

  /* shared: under mu */
  pthread_mutex_t mu;
  pthread_cond_t wake;
  uint64_t written, taken, durable, fsyncs;
  struct timespec dirty_since; /* when the first line not taken on yet was flushed */
  int dir_fd;                  /* the folder of a new file, to fsync once, or -1 */
  /* OB_WAL_CREATE of a regular file: written aside until its first flush */
  char *target;   /* where it goes (a symbolic link followed), or NULL once there */
  char *tmp_name; /* the aside file's name, when it has one (no O_TMPFILE), or NULL */
  int old_fd;     /* the file target names now, held locked until replaced, or -1 */
  dev_t old_dev;  /* and its identity: replaced only while still it and empty, */
  ino_t old_ino;  /* unless OB_WAL_OVERWRITE */
  int overwrite;
  int sync_errno;              /* a failed fsync's errno: no more fsyncs after it */
  int stop, idle;
  notifier *note;
};

int ob_fsync_parse(const char *s, ob_fsync *out) {
  static const char *const names[] = {"never", "batch", "always"};
  for (int i = 0; i < 3; i++)
    if (s && !strcmp(s, names[i])) {
      *out = (ob_fsync)i;
      return OB_OK;
    }
  return OB_EINVAL;
}

const char *ob_fsync_name(ob_fsync mode) {
  return mode == OB_FSYNC_NEVER ? "never" : mode == OB_FSYNC_ALWAYS ? "always" : "batch";
}

/* --- failures -------------------------------------------------------------------- */

static void call_ready(ob_wal *w);

/* Fails the wal for good with "PATH: what: strerror(e)"; waiters hear it from the loop. */
static int fail(ob_wal *w, int e, const char *what) {
  if (!w->code) {
    w->code = OB_EIO;
    snprintf(w->error, sizeof w->error, "%s: %s: %s", w->path, what, strerror(e));
    if (w->note)
      uv_async_send(&w->note->h);
  }
  return w->code;
}

void ob_wal_fail(ob_wal *w, const char *why) {
  if (w->code)
    return;
  w->code = OB_EIO;
  snprintf(w->error, sizeof w->error, "%s", why ? why : "the journal failed");
  if (w->note)
    uv_async_send(&w->note->h);
}

static const char sync_failed[] = "cannot sync the journal to disk";

/* Makes the syncer's error e (read under mu, or after the join) the wal's: loop thread. */
static int adopt_sync_error(ob_wal *w, int e) { return e ? fail(w, e, sync_failed) : w->code; }

/* --- the syncer -------------------------------------------------------------------- */

static int sync_fd(int fd, int data_only) {
  int rc;
  do
    rc = data_only ? fdatasync(fd) : fsync(fd);
  while (rc < 0 && errno == EINTR);
  return rc < 0 ? errno : 0;
}

static void window_end(const struct timespec *from, unsigned ms, struct timespec *until) {
  long long ns = from->tv_nsec + (long long)ms * 1000000LL;
  until->tv_sec = from->tv_sec + (time_t)(ns / 1000000000LL);
  until->tv_nsec = (long)(ns % 1000000000LL);
}

static void *syncer_main(void *arg) {
  ob_wal *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->stop && (w->written == w->taken || w->sync_errno)) {
      w->idle = 1;
      pthread_cond_wait(&w->wake, &w->mu);
    }
    w->idle = 0;
    if (w->written == w->taken || w->sync_errno)
      break; /* closing, and nothing (more) can be synced */
    if (w->mode == OB_FSYNC_BATCH) {
      struct timespec until;
      window_end(&w->dirty_since, w->window_ms, &until);
      while (!w->stop && pthread_cond_timedwait(&w->wake, &w->mu, &until) != ETIMEDOUT) {
      }
    }
    uint64_t target = w->written;
    int dir_fd = w->dir_fd;
    w->taken = target;
    w->dir_fd = -1;
    pthread_mutex_unlock(&w->mu);
    /* a new file's name must be on disk too, once, before its first line counts as
     * durable (where the file system can sync a folder at all: some say EINVAL);
     * after the file's lines, so that the name is never durable without them */
    int e = sync_fd(w->fd, 1);
    if (!e && dir_fd >= 0 && (e = sync_fd(dir_fd, 0)) && (e == EINVAL || e == ENOTSUP))
      e = 0;
    if (dir_fd >= 0)
      close(dir_fd);
    pthread_mutex_lock(&w->mu);
    w->fsyncs++;
    if (e)
      w->sync_errno = e;
    else
      w->durable = target;
    if (w->note)
      uv_async_send(&w->note->h);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* Starts the syncer with every signal blocked: signals are the loop thread's. */
static int syncer_start(ob_wal *w) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&w->syncer, NULL, syncer_main, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  w->has_syncer = rc == 0;
  return rc;
}

/* --- waiters (loop thread) ------------------------------------------------------------ */

static void free_note(uv_handle_t *h) { free(h); }

/* Closes the notifier: after this the syncer cannot reach it, and it is freed when
 * the loop runs its close callback. Waiters still registered are dropped. */
static void close_note(ob_wal *w) {
  notifier *n = w->note;
  w->nwaiters = 0;
  if (!n)
    return;
  pthread_mutex_lock(&w->mu);
  w->note = NULL;
  pthread_mutex_unlock(&w->mu);
  n->w = NULL;
  uv_close((uv_handle_t *)&n->h, free_note);
}

static void on_note(uv_async_t *h) {
  notifier *n = (notifier *)h;
  if (n->w)
    call_ready(n->w);
}

/* Calls every waiter whose line is durable (all of them, with the error, once the
 * wal has failed). They are taken out first: a callback may register more, flush,
 * or close the wal (then the rest are not called). O(waiters) a notification: the
 * waiters are kept in the order they came, and usually all become ready together. */
static void call_ready(ob_wal *w) {
  uint64_t durable = ob_wal_durable(w);
  int code = ob_wal_error(w) ? w->code : OB_OK;
  size_t nready = 0, keep = 0;
  for (size_t i = 0; i < w->nwaiters; i++)
    nready += code || w->waiters[i].seq <= durable;
  if (!nready) {
    if (!w->nwaiters)
      close_note(w);
    return;
  }
  waiter *ready = ob_xmalloc(nready * sizeof *ready);
  nready = 0;
  for (size_t i = 0; i < w->nwaiters; i++) {
    if (code || w->waiters[i].seq <= durable)
      ready[nready++] = w->waiters[i];
    else
      w->waiters[keep++] = w->waiters[i];
  }
  w->nwaiters = keep;
  notifier *n = w->note;
  for (size_t i = 0; i < nready && n->w; i++)
    ready[i].cb(ready[i].ud, code);
  free(ready);
  if (n->w && !w->nwaiters && w->note == n)
    close_note(w); /* nobody waits: the loop need not stay alive for us */
}

int ob_wal_when_durable(ob_wal *w, uint64_t seq, ob_wal_durable_cb cb, void *ud) {
  if (!w->loop || !seq || seq > w->seq)
    return OB_EINVAL;
  if (!w->note) {
    notifier *n = ob_xmalloc(sizeof *n);
    int rc = uv_async_init(w->loop, &n->h, on_note);
    if (rc < 0) { /* libuv's codes are negated errnos */
      free(n);
      return fail(w, -rc, "cannot watch the journal's fsyncs");
    }
    n->w = w;
    pthread_mutex_lock(&w->mu);
    w->note = n;
    pthread_mutex_unlock(&w->mu);
  }
  if (w->nwaiters == w->capwaiters) {
    w->capwaiters = w->capwaiters ? 2 * w->capwaiters : 16;
    w->waiters = ob_xrealloc(w->waiters, w->capwaiters * sizeof *w->waiters);
  }
  w->waiters[w->nwaiters++] = (waiter){seq, cb, ud};
  /* read after the notifier is published: a line the syncer makes durable from
   * here on is announced by it, one made durable before is seen here */
  if (w->code || seq <= ob_wal_durable(w))
    uv_async_send(&w->note->h);
  return OB_OK;
}

/* --- opening ------------------------------------------------------------------------- */

/* Asked each time (a vDSO-cheap call): wals open on several threads at once. */
static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static int read_at(int fd, char *b, size_t n, uint64_t off) {
  while (n) {
    ssize_t got = pread(fd, b, n, (off_t)off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return got < 0 ? errno : EIO; /* the file shrank under us */
    b += got;
    n -= (size_t)got;
    off += (uint64_t)got;
  }
  return 0;
}

/* OB_WAL_APPEND: cuts a last line that has no '\n' back to the end of the line
 * before. Reads backwards from the end until a '\n' (usually one block); only when
 * a cut is made is the file read from the start, to number the torn line. */
static int cut_torn(ob_wal *w, uint64_t size) {
  char chunk[65536];
  if (!size)
    return OB_OK;
  int e = read_at(w->fd, chunk, 1, size - 1);
  if (e)
    return fail(w, e, "cannot read the journal");
  if (chunk[0] == '\n')
    return OB_OK;
  uint64_t end = size, cut = 0;
  while (end > 0) {
    size_t n = end < sizeof chunk ? (size_t)end : sizeof chunk;
    if ((e = read_at(w->fd, chunk, n, end - n)))
      return fail(w, e, "cannot read the journal");
    const char *nl = memrchr(chunk, '\n', n);
    if (nl) {
      cut = end - n + (uint64_t)(nl - chunk) + 1;
      break;
    }
    end -= n;
  }
  size_t line = 1;
  for (uint64_t off = 0; off < cut;) {
    size_t n = cut - off < sizeof chunk ? (size_t)(cut - off) : sizeof chunk;
    if ((e = read_at(w->fd, chunk, n, off)))
      return fail(w, e, "cannot read the journal");
    for (const char *p = chunk; (p = memchr(p, '\n', n - (size_t)(p - chunk))); p++)
      line++;
    off += n;
  }
  if (ftruncate(w->fd, (off_t)cut) < 0)
    return fail(w, errno, "cannot cut the torn last line of the journal");
  if (w->mode != OB_FSYNC_NEVER) {
    if ((e = sync_fd(w->fd, 1)))
      return fail(w, e, sync_failed);
    w->fsyncs++;
  }
  w->torn = 1;
  w->cut = (ob_wal_cut){line, cut, size - cut};
  return OB_OK;
}

/* OB_WAL_APPEND: the file's length without the zeros a mapped writer that died left
 * after its lines (read backwards, a block at a time: usually one). */
static int nul_tail(ob_wal *w, uint64_t size, uint64_t *data) {
  char chunk[65536];
  uint64_t end = size;
  while (end > 0) {
    size_t n = end < sizeof chunk ? (size_t)end : sizeof chunk;
    int e = read_at(w->fd, chunk, n, end - n);
    if (e)
      return fail(w, e, "cannot read the journal");
    while (n && !chunk[n - 1])
      n--, end--;
    if (n)
      break;
  }
  *data = end;
  if (end < size && ftruncate(w->fd, (off_t)end) < 0)
    return fail(w, errno, "cannot cut the zeros off the journal's end");
  return OB_OK;
}

/* The folder holding path, opened to be fsynced (-1 when it cannot be: then only
 * the file's content is made durable, as before this wal). */
static int open_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? ob_xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : ob_xstrdup(".");
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  return fd;
}

/* The pid holding a flock on fd's file, from /proc/locks ("1: FLOCK  ADVISORY  WRITE
 * 1234 08:01:5678 0 EOF"), or 0 when it cannot be told. */
static long lock_holder(int fd) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return 0;
  FILE *f = fopen("/proc/locks", "re");
  if (!f)
    return 0;
  char line[256];
  long pid = 0;
  while (!pid && fgets(line, sizeof line, f)) {
    char kind[16];
    long p;
    unsigned maj, min;
    unsigned long long ino;
    if (sscanf(line, "%*[^:]: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min, &ino) == 5 &&
        !strcmp(kind, "FLOCK") && ino == (unsigned long long)st.st_ino &&
        maj == major(st.st_dev) && min == minor(st.st_dev))
      pid = p;
  }
  fclose(f);
  return pid;
}

/* Takes the writer's lock on fd's file (flock: the open file's, so another open of
 * it, in this process too, is another writer): 0, or -1 with err said. */
static int take_lock(int fd, const char *path, ob_error *err) {
  int rc;
  while ((rc = flock(fd, LOCK_EX | LOCK_NB)) < 0 && errno == EINTR) {
  }
  if (rc == 0)
    return 0;
  if (errno == EWOULDBLOCK) {
    long pid = lock_holder(fd);
    char who[48] = "";
    if (pid > 0)
      snprintf(who, sizeof who, " (pid %ld)", pid);
    ob_error_set(err, OB_EINVAL, 0, "%s is being written by another obelus%s: not touched", path,
                 who);
  } else if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) {
    return 0; /* a file system without locks (some NFS): as before them */
  } else {
    ob_error_set(err, OB_EIO, 0, "%s: cannot lock the journal: %s", path, strerror(errno));
  }
  return -1;
}

/* OB_WAL_CREATE of a regular file (or of none yet). The file's lines are written
 * aside -- an unnamed file (O_TMPFILE) in the folder it goes into, or a hidden
 * ".NAME.XXXXXX" there where the file system has no unnamed files -- and the file
 * is linked into place by the first flush (publish), whole lines in it: so no kill
 * leaves a journal without its first record, and an existing file is never
 * truncated: it is replaced by a rename, and only when empty (or with
 * OB_WAL_OVERWRITE), while it stays the file seen here (a file that appears
 * meanwhile is kept: link(2) refuses an existing name). Returns the aside file's fd
 * (locked), or -1 with err said. */
static int open_aside(ob_wal *w, const char *path, int overwrite, ob_error *err) {
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) { /* written where it leads */
    char *real = realpath(path, NULL);
    if (!real) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot write the journal: a symbolic link that leads "
                                   "nowhere (%s)", path, strerror(errno));
      return -1;
    }
    w->target = ob_xstrdup(real);
    free(real);
  } else {
    w->target = ob_xstrdup(path);
  }
  if (stat(w->target, &st) == 0) {
    int fd = open(w->target, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) < 0) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot open the journal: %s", path, strerror(errno));
      if (fd >= 0)
        close(fd);
      return -1;
    }
    w->old_fd = fd;
    if (take_lock(fd, path, err))
      return -1;
    if (st.st_size > 0 && !overwrite) {
      ob_error_set(err, OB_EINVAL, 0, "%s: a journal (or another file) is there already: not "
                   "replaced", path);
      return -1;
    }
    w->old_dev = st.st_dev;
    w->old_ino = st.st_ino;
  } else if (errno != ENOENT) {
    ob_error_set(err, OB_EIO, 0, "%s: cannot open the journal: %s", path, strerror(errno));
    return -1;
  }
  const char *slash = strrchr(w->target, '/');
  char *dir = slash ? ob_xstrndup(w->target, slash == w->target ? 1 : (size_t)(slash - w->target))
                    : ob_xstrdup(".");
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (fd < 0 && errno != ENOENT && errno != EACCES && errno != EROFS) {
    /* no unnamed files here (EOPNOTSUPP, EISDIR on old kernels): a hidden name */
    const char *base = slash ? slash + 1 : w->target;
    size_t n = strlen(dir) + strlen(base) + 16;
    w->tmp_name = ob_xmalloc(n);
    snprintf(w->tmp_name, n, "%s/.%s.XXXXXX", dir, base);
    fd = mkostemp(w->tmp_name, O_CLOEXEC);
    if (fd >= 0) {
      mode_t um = umask(0);
      umask(um);
      fchmod(fd, 0666 & ~um);
    } else {
      free(w->tmp_name);
      w->tmp_name = NULL;
    }
  }
  free(dir);
  if (fd < 0) {
    ob_error_set(err, OB_EIO, 0, "%s: cannot open the journal: %s", path, strerror(errno));
    return -1;
  }
  if (take_lock(fd, path, err)) {
    close(fd);
    return -1;
  }
  w->overwrite = overwrite;
  return fd;
}

/* A name for the aside file next to target, for the rename that replaces a file:
 * links the unnamed file there and returns it (malloc'd), or NULL with errno. */
static char *name_aside(ob_wal *w) {
  size_t n = strlen(w->target) + 24;
  char *name = ob_xmalloc(n);
  char proc[48];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
  for (unsigned i = 0; i < 100; i++) {
    const char *slash = strrchr(w->target, '/');
    int dl = slash ? (int)(slash - w->target + 1) : 0;
    snprintf(name, n, "%.*s.%s.%u.%u", dl, w->target, slash ? slash + 1 : w->target,
             (unsigned)getpid(), (unsigned)rand() ^ i);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
      return name;
    if (errno != EEXIST)
      break;
  }
  int e = errno;
  free(name);
  errno = e;
  return NULL;
}

/* The first flush: the lines are in the aside file (in the page cache: a kill
 * cannot take them back); it becomes target. Not fsynced here: the loop thread
 * never fsyncs; the syncer's first fsync makes the file's lines durable, then its
 * name (the folder), so that a power cut too leaves the name only with them. */
static int publish(ob_wal *w) {
  int e;
  char proc[48];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", w->fd);
  int rc = w->tmp_name ? link(w->tmp_name, w->target)
                       : linkat(AT_FDCWD, proc, AT_FDCWD, w->target, AT_SYMLINK_FOLLOW);
  if (rc < 0 && errno == EEXIST) {
    struct stat st;
    int same = w->old_fd >= 0 && lstat(w->target, &st) == 0 && st.st_dev == w->old_dev &&
               st.st_ino == w->old_ino && (st.st_size == 0 || w->overwrite);
    if (!same && !w->overwrite) {
      snprintf(w->error, sizeof w->error, "%s: a file appeared there while the run began: not "
               "replaced", w->path);
      w->code = OB_EIO;
      return w->code;
    }
    char *from = w->tmp_name ? ob_xstrdup(w->tmp_name) : name_aside(w);
    rc = from ? rename(from, w->target) : -1;
    e = errno;
    if (from && rc < 0)
      unlink(from);
    free(from);
    errno = e;
  }
  if (rc < 0)
    return fail(w, errno, "cannot put the journal in place");
  if (w->tmp_name) {
    unlink(w->tmp_name);
    free(w->tmp_name);
    w->tmp_name = NULL;
  }
  free(w->target);
  w->target = NULL;
  if (w->old_fd >= 0) { /* the file replaced: its lock goes with it */
    close(w->old_fd);
    w->old_fd = -1;
  }
  return OB_OK;
}

ob_wal *ob_wal_open(uv_loop_t *loop, const char *path, int flags, ob_fsync mode, ob_error *err) {
  int overwrite = (flags & OB_WAL_OVERWRITE) != 0;
  flags &= ~OB_WAL_OVERWRITE;
  if ((flags != OB_WAL_CREATE && flags != OB_WAL_APPEND) ||
      (mode != OB_FSYNC_NEVER && mode != OB_FSYNC_BATCH && mode != OB_FSYNC_ALWAYS)) {
    ob_error_set(err, OB_EINVAL, 0, "%s: bad flags or fsync mode for the journal", path);
    return NULL;
  }
  int append = flags == OB_WAL_APPEND;
  ob_wal *w = ob_xcalloc(1, sizeof *w);
  w->old_fd = -1;
  /* a regular file (or a new one) is opened for reading too, as a mapping needs;
   * anything else (a pipe, a terminal, /dev/null) as before: written with write(2),
   * never truncated (a pipe opened for reading would never see its reader go) */
  struct stat st;
  int fd = -1, rdwr = 0, regular = stat(path, &st) == 0 ? S_ISREG(st.st_mode) : errno == ENOENT;
  if (append) {
    fd = open(path, O_APPEND | O_CLOEXEC | O_RDWR, 0666);
    rdwr = regular;
  } else if (regular) {
    fd = open_aside(w, path, overwrite, err);
    rdwr = 1;
    if (fd < 0)
      goto refused;
  } else {
    fd = open(path, O_APPEND | O_CLOEXEC | O_WRONLY | O_CREAT | O_NOCTTY, 0666);
  }
  if (fd < 0 || fstat(fd, &st) < 0) {
    ob_error_set(err, OB_EIO, 0, "%s: cannot open the journal: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    goto refused;
  }
  if (append && !S_ISREG(st.st_mode)) {
    ob_error_set(err, OB_EIO, 0, "%s: cannot append to the journal: not a regular file", path);
    close(fd);
    goto refused;
  }
  if (append && take_lock(fd, path, err)) { /* before anything is cut */
    close(fd);
    goto refused;
  }
  w->loop = loop;
  w->path = ob_xstrdup(path);
  w->fd = fd;
  w->dir_fd = -1;
  w->mode = S_ISREG(st.st_mode) ? mode : OB_FSYNC_NEVER;
  w->window_ms = OB_WAL_BATCH_MS;
  ob_buf_init(&w->buf);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the window must not jump with the date */
  pthread_cond_init(&w->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->mu, NULL);
  uint64_t size = (uint64_t)st.st_size;
  if (append && (nul_tail(w, size, &size) != OB_OK || cut_torn(w, size) != OB_OK)) {
    ob_error_set(err, OB_EIO, 0, "%s", w->error);
    ob_wal_close(w, NULL);
    return NULL;
  }
  w->mappable = rdwr && S_ISREG(st.st_mode);
  w->end = w->alloc = append ? (w->torn ? w->cut.offset : size) : 0;
  w->map_off = w->end / page_size() * page_size();
  if (w->mode != OB_FSYNC_NEVER) {
    if (!append)
      w->dir_fd = open_dir(w->target ? w->target : path);
    int e = syncer_start(w);
    if (e) {
      ob_error_set(err, OB_EIO, 0, "%s: cannot start the journal's fsync thread: %s", path,
                   strerror(e));
      ob_wal_close(w, NULL);
      return NULL;
    }
  }
  return w;
refused:
  if (w->old_fd >= 0)
    close(w->old_fd);
  free(w->target);
  if (w->tmp_name)
    unlink(w->tmp_name);
  free(w->tmp_name);
  free(w);
  return NULL;
}

int ob_wal_cut_to(ob_wal *w, uint64_t expect, uint64_t len) {
  if (w->code)
    return w->code;
  if (w->seq || w->map || w->target || len > w->end)
    return OB_EINVAL;
  if (w->end != expect) {
    snprintf(w->error, sizeof w->error, "%s: the journal changed since it was read (another "
             "obelus wrote it meanwhile?): not touched", w->path);
    return w->code = OB_EIO;
  }
  if (len == w->end)
    return OB_OK;
  if (ftruncate(w->fd, (off_t)len) < 0)
    return fail(w, errno, "cannot cut the journal back to its last record");
  if (w->mode != OB_FSYNC_NEVER) {
    int e = sync_fd(w->fd, 1);
    if (e)
      return fail(w, e, sync_failed);
    pthread_mutex_lock(&w->mu);
    w->fsyncs++;
    pthread_mutex_unlock(&w->mu);
  }
  w->end = w->alloc = len;
  w->map_off = w->end / page_size() * page_size();
  return OB_OK;
}

uint64_t ob_wal_size(const ob_wal *w) { return w->end; }

/* --- adding and flushing ------------------------------------------------------------------ */

uint64_t ob_wal_add(ob_wal *w, const char *text, size_t len) {
  if (w->code)
    return 0;
  ob_buf_add(&w->buf, text, len);
  ob_buf_addc(&w->buf, '\n');
  return ++w->seq;
}

uint64_t ob_wal_add_value(ob_wal *w, const ob_value *v) {
  if (w->code)
    return 0;
  ob_json_write(&w->buf, v, OB_JSON_COMPACT);
  ob_buf_addc(&w->buf, '\n');
  return ++w->seq;
}

ob_buf *ob_wal_line(ob_wal *w) { return w->code ? NULL : &w->buf; }

uint64_t ob_wal_line_end(ob_wal *w) {
  ob_buf_addc(&w->buf, '\n');
  return ++w->seq;
}

uint64_t ob_wal_line_ended(ob_wal *w) { return ++w->seq; }

/* Unmaps the file and cuts the zeros past the lines; the next growth maps it again
 * from the lines' end. */
static int cut_back(ob_wal *w) {
  if (w->map)
    munmap(w->map, w->map_len);
  w->map = NULL;
  w->map_len = 0;
  w->map_off = w->end / page_size() * page_size();
  if (w->alloc > w->end && ftruncate(w->fd, (off_t)w->end) < 0)
    return fail(w, errno, "cannot write the journal");
  w->alloc = w->end;
  return OB_OK;
}

/* Gives the mapping up for write(2), for good. */
static int unmap(ob_wal *w) {
  w->mappable = 0;
  return cut_back(w);
}

/* Makes room in the mapping for n more bytes after the lines: OB_OK (w->map may now
 * be NULL: write(2) from here on), or the wal's failure. */
static int grow(ob_wal *w, size_t n) {
  uint64_t want = w->end + n;
  if (want <= w->alloc)
    return OB_OK;
  if (!w->chunk)
    w->chunk = FIRST_CHUNK;
  uint64_t to = w->alloc + w->chunk > want ? w->alloc + w->chunk : want;
  int e;
  while ((e = fallocate(w->fd, 0, (off_t)w->alloc, (off_t)(to - w->alloc)) < 0 ? errno : 0) &&
         (e == EINTR || ((e == ENOSPC || e == EFBIG || e == EDQUOT) && to > want)))
    if (e != EINTR)
      to = want; /* no room for a chunk: maybe for these lines */
  if (e == EOPNOTSUPP || e == ENOSYS || e == ENODEV)
    return unmap(w);
  if (e)
    return fail(w, e, "cannot write the journal");
  w->alloc = to;
  if (w->chunk < MAX_CHUNK)
    w->chunk *= 2;
  size_t page = page_size();
  size_t len = (size_t)((to - w->map_off + page - 1) / page * page);
  if (len <= w->map_len)
    return OB_OK;
  void *m = w->map ? mremap(w->map, w->map_len, len, MREMAP_MAYMOVE)
                   : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, (off_t)w->map_off);
  if (m == MAP_FAILED)
    return unmap(w);
  if (!w->map)
    madvise(m, len, MADV_DONTFORK); /* a child spawned for a tool need not copy it */
  w->map = m;
  w->map_len = len;
  return OB_OK;
}

static int write_all(ob_wal *w) {
  for (size_t off = 0; off < w->buf.len;) {
    ssize_t n = write(w->fd, w->buf.data + off, w->buf.len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(w, n < 0 ? errno : EIO, "cannot write the journal");
    off += (size_t)n;
  }
  w->end += w->buf.len;
  return OB_OK;
}

int ob_wal_flush(ob_wal *w) {
  if (w->code || !w->buf.len)
    return w->code;
  if (w->mappable && grow(w, w->buf.len) != OB_OK)
    return w->code;
  if (w->mappable) { /* in the page cache once copied: a SIGKILL cannot take it back */
    memcpy(w->map + (w->end - w->map_off), w->buf.data, w->buf.len);
    w->end += w->buf.len;
    /* the pages behind the lines' end are done with: unmapped (their data stays in
     * the page cache, dirty until written back), so that neither the process's
     * memory nor its address space grows with the journal */
    uint64_t keep = w->end / page_size() * page_size();
    size_t done = (size_t)(keep - w->map_off);
    if (done >= FIRST_CHUNK && done < w->map_len) {
      munmap(w->map, done);
      w->map += done;
      w->map_len -= done;
      w->map_off = keep;
    }
  } else if (write_all(w) != OB_OK) {
    return w->code;
  }
  if (w->target && publish(w) != OB_OK)
    return w->code;
  if (w->tee) {
    w->tee(w->tee_ud, w->buf.data, w->buf.len);
    if (w->code) /* the copy could not be kept (ob_wal_fail): as if this had failed */
      return w->code;
  }
  if (w->buf.cap > KEEP_BUFFER)
    ob_buf_free(&w->buf);
  w->buf.len = 0;
  w->flushed = w->seq;
  if (!w->has_syncer) { /* NEVER: a flushed line is as durable as it gets */
    if (w->nwaiters)
      uv_async_send(&w->note->h);
    return OB_OK;
  }
  pthread_mutex_lock(&w->mu);
  if (w->written == w->taken) /* these lines open a window */
    clock_gettime(CLOCK_MONOTONIC, &w->dirty_since);
  w->written = w->flushed;
  if (w->idle)
    pthread_cond_signal(&w->wake);
  int e = w->sync_errno;
  pthread_mutex_unlock(&w->mu);
  return adopt_sync_error(w, e);
}

void ob_wal_set_tee(ob_wal *w, ob_wal_tee_fn fn, void *ud) {
  w->tee = fn;
  w->tee_ud = ud;
}

int ob_wal_trim(ob_wal *w) {
  if (ob_wal_flush(w) == OB_OK && w->map)
    cut_back(w);
  return w->code;
}

/* --- closing ------------------------------------------------------------------------------ */

int ob_wal_close(ob_wal *w, ob_error *err) {
  if (!w)
    return OB_OK;
  ob_wal_flush(w);
  if (w->map) /* the zeros past the lines are cut before the last fsync */
    unmap(w);
  if (w->has_syncer) { /* it makes the last fsync, after the one in flight */
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->syncer, NULL);
    adopt_sync_error(w, w->sync_errno);
  }
  close_note(w);
  if (w->dir_fd >= 0)
    close(w->dir_fd);
  if (w->old_fd >= 0)
    close(w->old_fd);
  if (w->tmp_name) /* never put in place: nothing was written, or it failed */
    unlink(w->tmp_name);
  free(w->tmp_name);
  free(w->target);
  if (close(w->fd) < 0) /* NFS reports some write errors only here */
    fail(w, errno, "cannot close the journal");
  int rc = w->code;
  if (rc)
    ob_error_set(err, rc, 0, "%s", w->error);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->wake);
  ob_buf_free(&w->buf);
  free(w->waiters);
  free(w->path);
  free(w);
  return rc;
}

/* --- accessors --------------------------------------------------------------------------- */

uint64_t ob_wal_seq(const ob_wal *w) { return w->seq; }

uint64_t ob_wal_durable(ob_wal *w) {
  if (!w->has_syncer)
    return w->flushed;
  pthread_mutex_lock(&w->mu);
  uint64_t d = w->durable;
  pthread_mutex_unlock(&w->mu);
  return d;
}

size_t ob_wal_pending(const ob_wal *w) { return w->buf.len; }

uint64_t ob_wal_fsyncs(ob_wal *w) {
  pthread_mutex_lock(&w->mu);
  uint64_t n = w->fsyncs;
  pthread_mutex_unlock(&w->mu);
  return n;
}

ob_fsync ob_wal_mode(const ob_wal *w) { return w->mode; }

void ob_wal_set_window(ob_wal *w, unsigned ms) {
  pthread_mutex_lock(&w->mu);
  w->window_ms = ms;
  pthread_mutex_unlock(&w->mu);
}

const char *ob_wal_path(const ob_wal *w) { return w->path; }

const char *ob_wal_error(ob_wal *w) {
  if (!w->code && w->has_syncer) {
    pthread_mutex_lock(&w->mu);
    int e = w->sync_errno;
    pthread_mutex_unlock(&w->mu);
    adopt_sync_error(w, e);
  }
  return w->code ? w->error : NULL;
}

int ob_wal_torn(const ob_wal *w, ob_wal_cut *cut) {
  if (w->torn && cut)
    *cut = w->cut;
  return w->torn;
}
