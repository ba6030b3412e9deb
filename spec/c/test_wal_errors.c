/* test_wal_errors.c -- a journal that cannot be written fails for good, and says so
 * naming the file: a full disk (/dev/full), a file-size limit reached by a flush
 * (the file is grown ahead of its lines, and a flush whose lines cannot have room
 * is refused whole: the lines before it stay, no torn line), a failed fsync (no fsync is tried again: after one fails, a later success proves
 * nothing); waiters hear the failure; every later add, flush and close fails at
 * once with it; a path that cannot be opened is named. */
#include <signal.h>
#include <sys/resource.h>

#include "testwal.h"

static int calls, last_status;
static void on_durable(void *ud, int status) {
  calls++;
  last_status = status;
}

TEST(a_full_disk_fails_the_wal_naming_the_file) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, "/dev/full", OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  CHECK(w != NULL);
  CHECK(ob_wal_error(w) == NULL);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  calls = 0;
  CHECK_INT(ob_wal_when_durable(w, seq, on_durable, NULL), OB_OK);
  CHECK_INT(ob_wal_flush(w), OB_EIO);
  CHECK_STR(ob_wal_error(w), "/dev/full: cannot write the journal: No space left on device");
  CHECK_INT(ob_wal_add(w, "{}", 2), 0); /* failed for good */
  CHECK_INT(ob_wal_flush(w), OB_EIO);
  CHECK_INT(ob_wal_durable(w), 0);
  CHECK_INT(calls, 0); /* from the loop, not from within flush */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(calls, 1);
  CHECK_INT(last_status, OB_EIO);
  CHECK_INT(ob_wal_when_durable(w, seq, on_durable, NULL), OB_OK); /* late: told as well */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(calls, 2);
  CHECK_INT(last_status, OB_EIO);
  CHECK_INT(ob_wal_close(w, &err), OB_EIO);
  CHECK_STR(err.msg, "/dev/full: cannot write the journal: No space left on device");
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(a_size_limit_refuses_the_flush_that_passes_it) {
  const char *path = in_scratch("limit.jsonl");
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 100;
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN); /* then write says EFBIG */
  CHECK_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  char line[80];
  memset(line, 'x', sizeof line);
  line[0] = '"';
  line[58] = '"';
  CHECK_INT(ob_wal_add(w, line, 59), 1); /* 60 bytes with its '\n' */
  CHECK_INT(ob_wal_flush(w), OB_OK);
  line[78] = '"';
  CHECK_INT(ob_wal_add(w, line, 79), 2); /* 80 more: past the limit */
  int rc = ob_wal_flush(w);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  CHECK_INT(rc, OB_EIO);
  ob_buf want;
  ob_buf_init(&want);
  ob_buf_addf(&want, "%s: cannot write the journal: File too large", path);
  CHECK_STR(ob_wal_error(w), want.data);
  CHECK_INT(ob_wal_close(w, &err), OB_EIO);
  CHECK_STR(err.msg, want.data);
  CHECK_INT(file_size(path), 60); /* the lines flushed before, nothing of the rest */
  ob_buf_free(&want);
}

static int ignore_line(void *ud, const ob_journal_line *l, ob_error *err) { return OB_OK; }

TEST(what_a_refused_flush_leaves_reads_whole) {
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_read(in_scratch("limit.jsonl"), ignore_line, NULL, &info, &err), OB_OK);
  CHECK_INT(info.messages, 1);
  CHECK_INT(info.torn, 0);
}

TEST(a_failed_fsync_fails_the_wal_and_is_not_retried) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  atomic_store(&sync_fail_errno, EIO);
  int before = atomic_load(&sync_calls);
  ob_error err;
  const char *path = in_scratch("eio.jsonl");
  ob_wal *w = ob_wal_open(&loop, path, OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  calls = 0;
  CHECK_INT(ob_wal_when_durable(w, seq, on_durable, NULL), OB_OK);
  CHECK_INT(ob_wal_flush(w), OB_OK); /* the write itself worked */
  uv_run(&loop, UV_RUN_DEFAULT);     /* the fsync fails: the waiter is told */
  CHECK_INT(calls, 1);
  CHECK_INT(last_status, OB_EIO);
  CHECK_INT(ob_wal_durable(w), 0);
  ob_buf want;
  ob_buf_init(&want);
  ob_buf_addf(&want, "%s: cannot sync the journal to disk: Input/output error", path);
  CHECK_STR(ob_wal_error(w), want.data);
  CHECK_INT(ob_wal_add(w, "{}", 2), 0);
  CHECK_INT(ob_wal_flush(w), OB_EIO);
  CHECK_INT(ob_wal_close(w, &err), OB_EIO);
  CHECK_STR(err.msg, want.data);
  CHECK_INT(atomic_load(&sync_calls), before + 1); /* not even at close */
  ob_buf_free(&want);
  atomic_store(&sync_fail_errno, 0);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(a_path_that_cannot_be_opened_is_named) {
  ob_error err;
  CHECK(ob_wal_open(NULL, "/nonexistent/obelus/run.jsonl", OB_WAL_CREATE, OB_FSYNC_BATCH, &err) == NULL);
  CHECK_INT(err.code, OB_EIO);
  CHECK_STR(err.msg, "/nonexistent/obelus/run.jsonl: cannot open the journal: No such file or directory");
  CHECK(ob_wal_open(NULL, scratch, OB_WAL_CREATE, OB_FSYNC_BATCH, &err) == NULL);
  CHECK(strstr(err.msg, "Is a directory") != NULL);
}

int main(void) {
  sync_reset();
  scratch_make("wal-errors");
  RUN(a_full_disk_fails_the_wal_naming_the_file);
  RUN(a_size_limit_refuses_the_flush_that_passes_it);
  RUN(what_a_refused_flush_leaves_reads_whole);
  RUN(a_failed_fsync_fails_the_wal_and_is_not_retried);
  RUN(a_path_that_cannot_be_opened_is_named);
  scratch_remove();
  return TEST_END();
}
