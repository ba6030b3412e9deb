/* test_journal_read.c -- reading journals back (ob_journal.c): ob_journal_read hands
 * every complete line in order with its number and byte offset, records flagged
 * (an object with a string "journal" and no "type"), blank lines skipped; a torn
 * last line is reported (number, offset, length) and never handed over, parseable
 * or not; a malformed complete line is an error naming file and line; a callback
 * can stop the reading. ob_journal_load keeps messages only, so positions (--at N)
 * count messages. */
#include <unistd.h>

#include "log/ob_journal.h"
#include "test.h"

static char dir[64];

static const char *write_journal(const char *name, const char *text) {
  static char path[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  FILE *f = fopen(path[k], "wb");
  fputs(text, f);
  fclose(f);
  return path[k];
}

typedef struct seen {
  size_t n;
  size_t line[16];
  uint64_t offset[16];
  int record[16];
  char *json[16];
  size_t stop_at; /* stop (OB_ENOENT) at this line number, or 0 */
} seen;

static int note(void *ud, const ob_journal_line *l, ob_error *err) {
  seen *s = ud;
  if (l->line == s->stop_at)
    return ob_error_set(err, OB_ENOENT, 0, "stopped at %zu", l->line);
  s->line[s->n] = l->line;
  s->offset[s->n] = l->offset;
  s->record[s->n] = l->is_record;
  s->json[s->n++] = ob_json_print(l->value, OB_JSON_COMPACT, NULL);
  return OB_OK;
}

static void seen_free(seen *s) {
  for (size_t i = 0; i < s->n; i++)
    free(s->json[i]);
}

#define PLAN "{\"type\":\"plan\",\"plan\":[]}\n"
#define START "{\"journal\":\"start\",\"id\":\"#0\",\"attempt\":1}\n"
#define STATE1 "{\"type\":\"state\",\"data\":{\"a\":1}}\n"
#define SETTLED "{\"journal\":\"settled\",\"id\":\"#0\",\"state\":\"done\"}\n"
#define STATE2 "{\"type\":\"state\",\"data\":{\"a\":2}}\n"

TEST(every_line_comes_in_order_records_flagged) {
  const char *path = write_journal("mixed.jsonl", PLAN START "\n  \n" STATE1 SETTLED STATE2);
  seen s = {0};
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_read(path, note, &s, &info, &err), OB_OK);
  CHECK_INT(s.n, 5);
  size_t lines[] = {1, 2, 5, 6, 7};
  int records[] = {0, 1, 0, 1, 0};
  for (size_t i = 0; i < 5 && i < s.n; i++) {
    CHECK_INT(s.line[i], lines[i]);
    CHECK_INT(s.record[i], records[i]);
  }
  CHECK_INT(s.offset[0], 0);
  CHECK_INT(s.offset[1], strlen(PLAN));
  CHECK_INT(s.offset[2], strlen(PLAN START "\n  \n"));
  CHECK_STR(s.json[1], "{\"journal\":\"start\",\"id\":\"#0\",\"attempt\":1}");
  CHECK_INT(info.messages, 3);
  CHECK_INT(info.records, 2);
  CHECK_INT(info.torn, 0);
  seen_free(&s);
}

TEST(only_objects_with_a_string_journal_and_no_type_are_records) {
  const char *path = write_journal("kinds.jsonl",
                                   "{\"journal\":\"x\"}\n"
                                   "{\"journal\":5}\n"
                                   "{\"type\":\"state\",\"journal\":\"diary\"}\n"
                                   "[\"journal\"]\n"
                                   "{\"journal\":\"y\",\"more\":{\"type\":1}}\n");
  seen s = {0};
  ob_error err;
  CHECK_INT(ob_journal_read(path, note, &s, NULL, &err), OB_OK);
  CHECK_INT(s.n, 5);
  int records[] = {1, 0, 0, 0, 1};
  for (size_t i = 0; i < 5 && i < s.n; i++)
    CHECK_INT(s.record[i], records[i]);
  seen_free(&s);
}

TEST(a_torn_last_line_is_reported_and_never_handed_over) {
  const char *tails[] = {"{\"type\":\"state\",\"da", /* does not parse */
                         "{\"type\":\"state\",\"data\":{\"a\":3}}", /* parses: still torn */
                         "   "};
  for (int t = 0; t < 3; t++) {
    char text[256];
    snprintf(text, sizeof text, PLAN STATE1 "%s", tails[t]);
    const char *path = write_journal("torn.jsonl", text);
    seen s = {0};
    ob_journal_info info;
    ob_error err;
    CHECK_INT(ob_journal_read(path, note, &s, &info, &err), OB_OK);
    CHECK_INT(s.n, 2);
    CHECK_INT(info.messages, 2);
    CHECK_INT(info.torn, 1);
    CHECK_INT(info.torn_line, 3);
    CHECK_INT(info.torn_offset, strlen(PLAN STATE1));
    CHECK_INT(info.torn_bytes, strlen(tails[t]));
    seen_free(&s);
  }
  /* known even when the reading stops early */
  const char *path = write_journal("stop.jsonl", PLAN STATE1 "{\"ty");
  seen s = {.stop_at = 1};
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_read(path, note, &s, &info, &err), OB_ENOENT);
  CHECK_STR(err.msg, "stopped at 1");
  CHECK_INT(info.torn, 1);
  CHECK_INT(info.torn_line, 3);
  seen_free(&s);
}

TEST(a_malformed_complete_line_names_file_and_line) {
  const char *path = write_journal("bad.jsonl", PLAN STATE1 "{\"oops\": \n" STATE2);
  seen s = {0};
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_read(path, note, &s, &info, &err), OB_EJSON);
  CHECK_INT(s.n, 2);
  CHECK_INT(err.pos, 3);
  char want[160];
  snprintf(want, sizeof want, "%s:3: ", path);
  CHECK(strncmp(err.msg, want, strlen(want)) == 0);
  seen_free(&s);
  CHECK_INT(ob_journal_read("/nonexistent/x.jsonl", note, &s, &info, &err), OB_EIO);
  CHECK(strstr(err.msg, "/nonexistent/x.jsonl: No such file") == err.msg);
}

TEST(load_keeps_the_messages_only_so_positions_count_messages) {
  const char *path = write_journal("load.jsonl", PLAN START STATE1 SETTLED SETTLED STATE2 "{\"jour");
  ob_log *log = ob_log_new();
  ob_journal_info info;
  ob_error err;
  CHECK_INT(ob_journal_load(log, path, &info, &err), OB_OK);
  CHECK_INT(ob_log_len(log), 3);
  CHECK_INT(info.records, 3);
  CHECK_INT(info.torn, 1);
  ob_expr e;
  CHECK_INT(ob_expr_parse("\xE2\x80\xA0state.a", strlen("\xE2\x80\xA0state.a"), OB_EXPR_INPUT, &e, &err), OB_OK);
  ob_value *at2 = ob_log_eval(log, &e, NULL, 2), *now = ob_log_eval(log, &e, NULL, OB_LOG_NOW);
  CHECK_INT(ob_int_value(at2), 1); /* after the plan and the first state: records not counted */
  CHECK_INT(ob_int_value(now), 2);
  ob_unref(at2);
  ob_unref(now);
  ob_expr_free(&e);
  ob_log_free(log);
  /* a JSON array is read as before: no records, no torn lines */
  path = write_journal("array.json", "[{\"type\":\"state\",\"data\":{\"a\":1}}]");
  log = ob_log_new();
  CHECK_INT(ob_journal_load(log, path, &info, &err), OB_OK);
  CHECK_INT(ob_log_len(log), 1);
  CHECK_INT(info.messages, 1);
  CHECK_INT(info.torn, 0);
  ob_log_free(log);
}

TEST(the_torn_line_report_names_file_and_line) {
  ob_journal_info info = {0};
  ob_buf b;
  ob_buf_init(&b);
  ob_journal_torn_text(&b, "obelus log", "run.jsonl", &info); /* nothing torn: silent */
  CHECK(b.len == 0);
  info.torn = 1;
  info.torn_line = 7;
  ob_journal_torn_text(&b, "obelus log", "run.jsonl", &info);
  CHECK_STR(b.data, "obelus log: run.jsonl:7: the last line is torn (the process died while "
                    "writing it); ignored\n");
  ob_buf_free(&b);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-journal-read-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  RUN(every_line_comes_in_order_records_flagged);
  RUN(only_objects_with_a_string_journal_and_no_type_are_records);
  RUN(a_torn_last_line_is_reported_and_never_handed_over);
  RUN(a_malformed_complete_line_names_file_and_line);
  RUN(load_keeps_the_messages_only_so_positions_count_messages);
  RUN(the_torn_line_report_names_file_and_line);
  const char *names[] = {"mixed.jsonl", "kinds.jsonl", "torn.jsonl", "stop.jsonl",
                         "bad.jsonl",   "load.jsonl",  "array.json"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  rmdir(dir);
  return TEST_END();
}
