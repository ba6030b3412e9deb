/* test_wal_create.c -- a journal never destroys a file (issue 26): OB_WAL_CREATE
 * refuses an existing non-empty file (OB_WAL_OVERWRITE replaces it, at the first
 * flush, whole); the file appears only with its first lines, never empty, and not at
 * all when none were written; a file that appears meanwhile is kept; a symbolic link
 * is followed; a wal holds a lock on its file that a second writer (CREATE or APPEND)
 * is refused by, naming the holder's pid; ob_wal_cut_to refuses a file that changed
 * since its reader saw it. */
#include "testwal.h"

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* The scratch folder's hidden entries (files written aside and left behind). */
static int hidden_left(void) {
  DIR *d = opendir(scratch);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d)))
    n += e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d)
    closedir(d);
  return n;
}

TEST(an_existing_file_is_refused_untouched) {
  const char *path = in_scratch("precious.json");
  spit(path, "{\"plan\":[]}\n", 12);
  ob_error err;
  CHECK(ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err) == NULL);
  CHECK(strstr(err.msg, "is there already: not replaced") != NULL);
  size_t len;
  char *text = slurp(path, &len);
  CHECK_STR(text, "{\"plan\":[]}\n");
  free(text);
  CHECK_INT(hidden_left(), 0);
}

TEST(overwrite_replaces_it_at_the_first_flush_whole) {
  const char *path = in_scratch("precious.json");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE | OB_WAL_OVERWRITE, OB_FSYNC_BATCH, &err);
  CHECK(w != NULL);
  size_t len;
  char *text = slurp(path, &len);
  CHECK_STR(text, "{\"plan\":[]}\n"); /* not yet: nothing written */
  free(text);
  ob_wal_add(w, "{\"a\":1}", 7);
  CHECK_INT(ob_wal_flush(w), OB_OK);
  CHECK_INT(lines_size(path), 8);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  text = slurp(path, &len);
  CHECK_STR(text, "{\"a\":1}\n");
  free(text);
  CHECK_INT(hidden_left(), 0);
}

TEST(a_new_file_appears_with_its_first_lines_or_not_at_all) {
  const char *path = in_scratch("new.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  CHECK(!exists(path));
  ob_wal_add(w, "{\"first\":1}", 11);
  CHECK(!exists(path)); /* buffered only */
  CHECK_INT(ob_wal_flush(w), OB_OK);
  CHECK_INT(lines_size(path), 12);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(file_size(path), 12);
  /* a wal that writes nothing leaves nothing */
  const char *none = in_scratch("none.jsonl");
  w = ob_wal_open(NULL, none, OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK(!exists(none));
  /* an empty file is taken (a name made by mktemp) */
  const char *empty = in_scratch("empty.jsonl");
  spit(empty, "", 0);
  w = ob_wal_open(NULL, empty, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  ob_wal_add(w, "{}", 2);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(file_size(empty), 3);
  CHECK_INT(hidden_left(), 0);
}

TEST(a_file_that_appears_meanwhile_is_kept) {
  const char *path = in_scratch("raced.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  spit(path, "theirs\n", 7);
  ob_wal_add(w, "{}", 2);
  CHECK_INT(ob_wal_flush(w), OB_EIO);
  CHECK(strstr(ob_wal_error(w), "a file appeared there while the run began: not replaced") != NULL);
  CHECK_INT(ob_wal_close(w, &err), OB_EIO);
  size_t len;
  char *text = slurp(path, &len);
  CHECK_STR(text, "theirs\n");
  free(text);
  CHECK_INT(hidden_left(), 0);
}

TEST(a_symbolic_link_is_followed) {
  const char *target = in_scratch("target.jsonl");
  char link_path[128];
  snprintf(link_path, sizeof link_path, "%s", in_scratch("link.jsonl"));
  spit(target, "", 0);
  CHECK_INT(symlink(target, link_path), 0);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, link_path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  ob_wal_add(w, "{}", 2);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  struct stat st;
  CHECK_INT(lstat(link_path, &st), 0);
  CHECK(S_ISLNK(st.st_mode)); /* still a link, to the journal */
  CHECK_INT(file_size(target), 3);
  /* a link to a non-empty file is refused like the file */
  CHECK(ob_wal_open(NULL, link_path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err) == NULL);
  CHECK_INT(file_size(target), 3);
}

TEST(a_second_writer_is_refused_naming_the_first) {
  const char *path = in_scratch("locked.jsonl");
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  ob_wal_add(w, "{\"journal\":\"run\"}", 17);
  CHECK_INT(ob_wal_flush(w), OB_OK);
  char want[200];
  snprintf(want, sizeof want, "%s is being written by another obelus (pid %ld): not touched",
           path, (long)getpid());
  CHECK(ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err) == NULL);
  CHECK_STR(err.msg, want);
  CHECK(ob_wal_open(NULL, path, OB_WAL_CREATE | OB_WAL_OVERWRITE, OB_FSYNC_NEVER, &err) == NULL);
  CHECK_STR(err.msg, want);
  CHECK_INT(lines_size(path), 18); /* neither touched it */
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  /* its writer gone, the lock is too */
  w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
}

TEST(cut_to_refuses_a_file_that_changed_since_it_was_read) {
  const char *path = in_scratch("cut.jsonl");
  spit(path, "{\"a\":1}\n{\"b\":2}\n", 16);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_NEVER, &err);
  CHECK_INT(ob_wal_size(w), 16);
  CHECK_INT(ob_wal_cut_to(w, 8, 8), OB_EIO); /* its reader saw 8 bytes: not this file */
  CHECK(strstr(ob_wal_error(w), "the journal changed since it was read") != NULL);
  ob_wal_close(w, &err);
  CHECK_INT(file_size(path), 16);
  w = ob_wal_open(NULL, path, OB_WAL_APPEND, OB_FSYNC_BATCH, &err);
  CHECK_INT(ob_wal_cut_to(w, 16, 8), OB_OK);
  ob_wal_add(w, "{\"c\":3}", 7);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  size_t len;
  char *text = slurp(path, &len);
  CHECK_STR(text, "{\"a\":1}\n{\"c\":3}\n");
  free(text);
}

int main(void) {
  sync_reset();
  scratch_make("wal-create");
  RUN(an_existing_file_is_refused_untouched);
  RUN(overwrite_replaces_it_at_the_first_flush_whole);
  RUN(a_new_file_appears_with_its_first_lines_or_not_at_all);
  RUN(a_file_that_appears_meanwhile_is_kept);
  RUN(a_symbolic_link_is_followed);
  RUN(a_second_writer_is_refused_naming_the_first);
  RUN(cut_to_refuses_a_file_that_changed_since_it_was_read);
  scratch_remove();
  return TEST_END();
}
