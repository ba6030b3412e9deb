/* test_wal_kill.c -- what ob_wal_flush promises: once it returns, the lines survive
 * the process being killed with SIGKILL (no exit handler, no buffer of the C
 * library's gets a chance to run). A child process adds and flushes lines, adds
 * more without flushing, and kills itself; the parent finds exactly the flushed
 * lines in the file, each complete, in each fsync mode (no fsync is needed for
 * this: the kernel has the lines, copied into its page cache through the wal's
 * mapping of the file). The file goes on past them with the zeros the wal reserved
 * ahead of its lines: readers ignore them, and OB_WAL_APPEND (as resume opens the
 * journal) cuts them and adds its lines right after the last one. */
#include <signal.h>
#include <sys/wait.h>

#include "testwal.h"

/* In a child: writes flushed lines 1..n, buffers n+1..n+5, dies by SIGKILL. */
static void child(const char *path, ob_fsync mode, int n) {
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, mode, &err);
  if (!w)
    _exit(3);
  char line[64];
  for (int i = 1; i <= n + 5; i++) {
    int len = snprintf(line, sizeof line, "{\"type\":\"state\",\"data\":{\"i\":%d}}", i);
    ob_wal_add(w, line, (size_t)len);
    if (i == n / 2 || i == n)
      if (ob_wal_flush(w) != OB_OK)
        _exit(4);
  }
  kill(getpid(), SIGKILL);
  _exit(5); /* not reached */
}

static int count_i(void *ud, const ob_journal_line *l, ob_error *err) {
  int *next = ud;
  const ob_value *data = ob_object_get(l->value, "data", 4);
  const ob_value *i = data ? ob_object_get(data, "i", 1) : NULL;
  if (!i || ob_int_value(i) != *next)
    return ob_error_set(err, OB_EINVAL, 0, "line %zu is not {\"i\":%d}", l->line, *next);
  ++*next;
  return OB_OK;
}

static void killed_after_flush(ob_fsync mode) {
  const char *path = in_scratch(ob_fsync_name(mode));
  enum { N = 2000 };
  fflush(NULL); /* the child must not write our buffered output again */
  pid_t pid = fork();
  if (pid == 0)
    child(path, mode, N);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK_INT(WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status), SIGKILL);
  int next = 1;
  ob_error err;
  ob_journal_info info;
  int rc = ob_journal_read(path, count_i, &next, &info, &err);
  if (rc != OB_OK)
    fprintf(stderr, "  %s\n", err.msg);
  CHECK_INT(rc, OB_OK);
  CHECK_INT(next - 1, N); /* the flushed lines, not the buffered ones */
  CHECK_INT(info.torn, 0);
  size_t len = 0;
  char *text = slurp(path, &len);
  size_t lines = ob_journal_len(text, len);
  CHECK(lines > 0 && text[lines - 1] == '\n');
  CHECK(len > lines); /* the NUL tail a killed writer leaves */
  free(text);

  /* taken up again: the zeros are cut, the new lines follow the old ones */
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, mode, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_torn(w, NULL), 0); /* zeros are not a torn line */
  CHECK_INT(file_size(path), (long long)lines);
  char line[64];
  for (int i = N + 1; i <= N + 3000; i++) { /* past the first chunk: the mapping grows */
    int n = snprintf(line, sizeof line, "{\"type\":\"state\",\"data\":{\"i\":%d}}", i);
    ob_wal_add(w, line, (size_t)n);
    if (i % 7 == 0)
      CHECK_INT(ob_wal_flush(w), OB_OK);
  }
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  next = 1;
  CHECK_INT(ob_journal_read(path, count_i, &next, &info, &err), OB_OK);
  CHECK_INT(next - 1, N + 3000);
  CHECK_INT(info.torn, 0);
  text = slurp(path, &len);
  CHECK(len > 0 && ob_journal_len(text, len) == len); /* closed: cut back to its lines */
  free(text);
}

/* A torn line before the zeros (a reader may see one while a flush is being copied)
 * is reported and cut as any torn line, the zeros not counted in it. */
TEST(a_torn_line_before_the_zeros_is_cut) {
  const char *path = in_scratch("torn-zeros.jsonl");
  char text[4096] = "{\"a\":1}\n{\"b\":";
  spit(path, text, sizeof text);
  ob_journal_info info;
  ob_error err;
  int next = 1;
  CHECK_INT(ob_journal_read(path, count_i, &next, &info, &err), OB_EINVAL); /* {"a":1} */
  CHECK_INT(info.torn, 1);
  CHECK_INT(info.torn_line, 2);
  CHECK_INT(info.torn_offset, 8);
  CHECK_INT(info.torn_bytes, 5);
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  ob_wal_cut cut;
  CHECK_INT(ob_wal_torn(w, &cut), 1);
  CHECK_INT(cut.line, 2);
  CHECK_INT(cut.offset, 8);
  CHECK_INT(cut.bytes, 5);
  ob_wal_add(w, "{\"c\":3}", 7);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *now = slurp(path, NULL);
  CHECK_STR(now, "{\"a\":1}\n{\"c\":3}\n");
  free(now);
}

TEST(flushed_lines_survive_sigkill_never) { killed_after_flush(OB_FSYNC_NEVER); }
TEST(flushed_lines_survive_sigkill_batch) { killed_after_flush(OB_FSYNC_BATCH); }
TEST(flushed_lines_survive_sigkill_always) { killed_after_flush(OB_FSYNC_ALWAYS); }

int main(void) {
  sync_reset();
  scratch_make("wal-kill");
  RUN(flushed_lines_survive_sigkill_never);
  RUN(flushed_lines_survive_sigkill_batch);
  RUN(flushed_lines_survive_sigkill_always);
  RUN(a_torn_line_before_the_zeros_is_cut);
  scratch_remove();
  return TEST_END();
}
