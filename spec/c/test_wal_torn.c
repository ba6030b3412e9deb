/* test_wal_torn.c -- OB_WAL_APPEND on a journal whose last line was torn (its
 * writer died mid-line): the tail is cut back to the end of the last complete line
 * before anything is added, and ob_wal_torn says which line, where and how many
 * bytes, the same place ob_journal_read reports; a tail longer than the block read
 * backwards at a time, a file that is one torn line, a file ending in '\n' and an
 * empty file; appending to a missing file or to a device is refused, by name. */
#include "testwal.h"

static void write_text(const char *path, const char *text) { spit(path, text, strlen(text)); }

static int ignore_line(void *ud, const ob_journal_line *l, ob_error *err) { return OB_OK; }

TEST(a_torn_last_line_is_cut_before_lines_are_added) {
  const char *path = in_scratch("torn.jsonl");
  write_text(path, "{\"a\":1}\n{\"b\":2}\n{\"c\":");
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_read(path, ignore_line, NULL, &info, &err), OB_OK);
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_BATCH, &err);
  CHECK(w != NULL);
  ob_wal_cut cut = {0, 0, 0};
  CHECK_INT(ob_wal_torn(w, &cut), 1);
  CHECK_INT(cut.line, 3);
  CHECK_INT(cut.offset, 16);
  CHECK_INT(cut.bytes, 5);
  CHECK_INT(file_size(path), 16); /* cut at open, before any add */
  /* the reader saw the same line at the same place */
  CHECK_INT(info.torn, 1);
  CHECK_INT(info.torn_line, cut.line);
  CHECK_INT(info.torn_offset, cut.offset);
  CHECK_INT(info.torn_bytes, cut.bytes);
  CHECK_INT(ob_wal_fsyncs(w), 1); /* the cut is made durable at open */
  ob_wal_add(w, "{\"d\":4}", 7);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *text = slurp(path, NULL);
  CHECK_STR(text, "{\"a\":1}\n{\"b\":2}\n{\"d\":4}\n");
  free(text);
}

TEST(a_torn_tail_longer_than_a_block_is_found) {
  const char *path = in_scratch("long.jsonl");
  ob_buf b;
  ob_buf_init(&b);
  for (int i = 0; i < 3000; i++) /* 3000 lines before, 200 KB torn after */
    ob_buf_addf(&b, "{\"i\":%d}\n", i);
  size_t keep = b.len;
  ob_buf_add(&b, "{\"big\":\"", 8);
  for (int i = 0; i < 200000; i++)
    ob_buf_addc(&b, 'x');
  spit(path, b.data, b.len);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  ob_wal_cut cut;
  CHECK_INT(ob_wal_torn(w, &cut), 1);
  CHECK_INT(cut.line, 3001);
  CHECK_INT(cut.offset, keep);
  CHECK_INT(cut.bytes, b.len - keep);
  CHECK_INT(ob_wal_fsyncs(w), 0); /* NEVER: not even for the cut */
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(file_size(path), keep);
  ob_buf_free(&b);
}

TEST(a_file_that_is_one_torn_line_is_cut_to_nothing) {
  const char *path = in_scratch("one.jsonl");
  write_text(path, "{\"type\":\"pl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  ob_wal_cut cut;
  CHECK_INT(ob_wal_torn(w, &cut), 1);
  CHECK_INT(cut.line, 1);
  CHECK_INT(cut.offset, 0);
  CHECK_INT(cut.bytes, 11);
  CHECK_INT(file_size(path), 0);
  ob_wal_close(w, &err);
}

TEST(complete_and_empty_files_are_left_alone) {
  const char *texts[] = {"{\"a\":1}\n", "", "\n\n"};
  for (int i = 0; i < 3; i++) {
    const char *path = in_scratch("whole.jsonl");
    write_text(path, texts[i]);
    ob_error err;
    ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_BATCH, &err);
    CHECK(w != NULL);
    CHECK_INT(ob_wal_torn(w, NULL), 0);
    CHECK_INT(ob_wal_close(w, &err), OB_OK);
    CHECK_INT(file_size(path), strlen(texts[i]));
  }
}

TEST(appending_needs_an_existing_regular_file) {
  ob_error err;
  const char *missing = in_scratch("missing.jsonl");
  CHECK(ob_wal_open(NULL, missing, OB_WAL_APPEND, OB_FSYNC_BATCH, &err) == NULL);
  CHECK_INT(err.code, OB_EIO);
  CHECK(strstr(err.msg, missing) == err.msg);
  CHECK(strstr(err.msg, "No such file") != NULL);
  CHECK_INT(file_size(missing), -1);
  CHECK(ob_wal_open(NULL, "/dev/null", OB_WAL_APPEND, OB_FSYNC_NEVER, &err) == NULL);
  CHECK_STR(err.msg, "/dev/null: cannot append to the journal: not a regular file");
}

int main(void) {
  sync_reset();
  scratch_make("wal-torn");
  RUN(a_torn_last_line_is_cut_before_lines_are_added);
  RUN(a_torn_tail_longer_than_a_block_is_found);
  RUN(a_file_that_is_one_torn_line_is_cut_to_nothing);
  RUN(complete_and_empty_files_are_left_alone);
  RUN(appending_needs_an_existing_regular_file);
  scratch_remove();
  return TEST_END();
}
