/* test_wal_lines.c -- the journal writer (ob_wal.c) writes lines back in the order
 * they were added, numbered 1, 2, ...: text, values and lines printed in place (none
 * once the wal has failed), flushed one by one, in bursts and at close; the buffer
 * empties at each flush (one write); a wal reopened to append adds after the old
 * lines and numbers its own from 1; the fsync modes read and print by name. */
#include "testwal.h"

typedef struct collected {
  size_t n;
  char **text; /* each line's value as compact JSON */
} collected;

static int collect(void *ud, const ob_journal_line *l, ob_error *err) {
  collected *c = ud;
  c->text = realloc(c->text, (c->n + 1) * sizeof *c->text);
  c->text[c->n++] = ob_json_print(l->value, OB_JSON_COMPACT, NULL);
  return OB_OK;
}

static void collected_free(collected *c) {
  for (size_t i = 0; i < c->n; i++)
    free(c->text[i]);
  free(c->text);
}

TEST(lines_come_back_in_order_whatever_the_flushes) {
  const char *path = in_scratch("order.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_seq(w), 0);
  char line[64];
  int ok = 1;
  for (int i = 1; i <= 5000; i++) {
    int n = snprintf(line, sizeof line, "{\"i\":%d}", i);
    ok &= ob_wal_add(w, line, (size_t)n) == (uint64_t)i;
    if (i % 7 == 0 || (i > 1000 && i < 1100)) /* bursts of 7, then one by one */
      CHECK_INT(ob_wal_flush(w), OB_OK);
  }
  CHECK(ok);
  CHECK_INT(ob_wal_seq(w), 5000);
  CHECK(ob_wal_pending(w) > 0); /* the lines after the last multiple of 7 */
  CHECK_INT(ob_wal_close(w, &err), OB_OK); /* flushes them */
  collected c = {0, NULL};
  ob_journal_info info;
  CHECK_INT(ob_journal_read(path, collect, &c, &info, &err), OB_OK);
  CHECK_INT(c.n, 5000);
  CHECK_INT(info.messages, 5000);
  CHECK_INT(info.torn, 0);
  for (size_t i = 0; i < c.n; i++) {
    snprintf(line, sizeof line, "{\"i\":%zu}", i + 1);
    if (strcmp(c.text[i], line)) {
      CHECK_STR(c.text[i], line);
      break;
    }
  }
  collected_free(&c);
}

TEST(a_flush_writes_the_buffer_and_empties_it) {
  const char *path = in_scratch("flush.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK_INT(ob_wal_add(w, "{\"a\":1}", 7), 1);
  CHECK_INT(ob_wal_add(w, "{\"b\":2}", 7), 2);
  CHECK_INT(ob_wal_pending(w), 16); /* each line and its '\n' */
  CHECK_INT(file_size(path), -1);   /* adding makes no system call: no file yet */
  CHECK_INT(ob_wal_flush(w), OB_OK);
  CHECK_INT(ob_wal_pending(w), 0);
  CHECK_INT(lines_size(path), 16);
  CHECK(file_size(path) >= 16); /* a regular file is grown ahead of its lines */
  CHECK_INT(ob_wal_flush(w), OB_OK); /* nothing to do */
  CHECK_INT(ob_wal_durable(w), 2);   /* NEVER: flushed is as durable as it gets */
  CHECK_INT(ob_wal_fsyncs(w), 0);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *text = slurp(path, NULL);
  CHECK_STR(text, "{\"a\":1}\n{\"b\":2}\n");
  free(text);
  CHECK_INT(atomic_load(&sync_calls), 0);
}

TEST(values_are_written_as_compact_json) {
  const char *path = in_scratch("values.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  const char *json = "{\"type\":\"state\",\"data\":{\"s\":\"two\\nlines \xE2\x80\xA0\",\"n\":[1,2.5]}}";
  ob_value *v = ob_json_parse(json, strlen(json), &err);
  CHECK_INT(ob_wal_add_value(w, v), 1);
  const char *rec = "{\"journal\":\"start\",\"id\":\"#0\"}";
  CHECK_INT(ob_wal_add(w, rec, strlen(rec)), 2);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *text = slurp(path, NULL);
  char *want = ob_json_print(v, OB_JSON_COMPACT, NULL);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s\n{\"journal\":\"start\",\"id\":\"#0\"}\n", want);
  CHECK_STR(text, b.data);
  ob_buf_free(&b);
  free(want);
  free(text);
  ob_unref(v);
}

TEST(lines_printed_in_place_number_and_read_like_added_ones) {
  const char *path = in_scratch("inplace.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK_INT(ob_wal_add(w, "{\"a\":1}", 7), 1);
  ob_buf *b = ob_wal_line(w);
  CHECK(b != NULL);
  ob_buf_add(b, "{\"s\":", 5);
  ob_json_write_string(b, "q\"\n\x01", 4);
  ob_buf_addc(b, '}');
  CHECK_INT(ob_wal_line_end(w), 2);
  CHECK_INT(ob_wal_add(w, "{\"c\":3}", 7), 3);
  CHECK_INT(ob_wal_pending(w), 8 + 20 + 8);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *text = slurp(path, NULL);
  CHECK_STR(text, "{\"a\":1}\n{\"s\":\"q\\\"\\n\\u0001\"}\n{\"c\":3}\n");
  free(text);
}

TEST(a_failed_wal_gives_no_line_to_print_in) {
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, "/dev/full", OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  CHECK(ob_wal_line(w) != NULL);
  CHECK_INT(ob_wal_add(w, "{}", 2), 1);
  CHECK_INT(ob_wal_flush(w), OB_EIO);
  CHECK(ob_wal_line(w) == NULL); /* failed for good: nothing more is added */
  CHECK_INT(ob_wal_seq(w), 1);
  CHECK_INT(ob_wal_close(w, &err), OB_EIO);
}

TEST(an_appending_wal_adds_after_the_old_lines_and_numbers_its_own) {
  const char *path = in_scratch("append.jsonl");
  spit(path, "{\"old\":1}\n{\"old\":2}\n", 20);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_torn(w, NULL), 0);
  CHECK_INT(ob_wal_add(w, "{\"new\":1}", 9), 1);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  char *text = slurp(path, NULL);
  CHECK_STR(text, "{\"old\":1}\n{\"old\":2}\n{\"new\":1}\n");
  free(text);
}

TEST(fsync_modes_read_and_print_by_name) {
  const char *names[] = {"never", "batch", "always"};
  for (int i = 0; i < 3; i++) {
    ob_fsync m = (ob_fsync)-1;
    CHECK_INT(ob_fsync_parse(names[i], &m), OB_OK);
    CHECK_INT(m, i);
    CHECK_STR(ob_fsync_name(m), names[i]);
  }
  ob_fsync m = OB_FSYNC_ALWAYS;
  CHECK_INT(ob_fsync_parse("Batch", &m), OB_EINVAL);
  CHECK_INT(ob_fsync_parse("", &m), OB_EINVAL);
  CHECK_INT(ob_fsync_parse(NULL, &m), OB_EINVAL);
  CHECK_INT(m, OB_FSYNC_ALWAYS); /* untouched */
}

TEST(bad_flags_and_modes_are_refused) {
  ob_error err;
  CHECK(ob_wal_open(NULL, in_scratch("x"), 0, OB_FSYNC_NEVER, &err) == NULL);
  CHECK_INT(err.code, OB_EINVAL);
  CHECK(ob_wal_open(NULL, in_scratch("x"), OB_WAL_CREATE | OB_WAL_APPEND, OB_FSYNC_NEVER, &err) == NULL);
  CHECK(ob_wal_open(NULL, in_scratch("x"), OB_WAL_CREATE, (ob_fsync)7, &err) == NULL);
  CHECK_INT(file_size(in_scratch("x")), -1); /* nothing was created */
}

int main(void) {
  sync_reset();
  scratch_make("wal-lines");
  RUN(lines_come_back_in_order_whatever_the_flushes);
  RUN(a_flush_writes_the_buffer_and_empties_it);
  RUN(values_are_written_as_compact_json);
  RUN(lines_printed_in_place_number_and_read_like_added_ones);
  RUN(a_failed_wal_gives_no_line_to_print_in);
  RUN(an_appending_wal_adds_after_the_old_lines_and_numbers_its_own);
  RUN(fsync_modes_read_and_print_by_name);
  RUN(bad_flags_and_modes_are_refused);
  scratch_remove();
  return TEST_END();
}
