/* test_log_resolution.c -- "newest write wins" over a composed document: the
 * seeds' worked example, older writes showing through, expressions. */
#include "testlog.h"

TEST(seeds_worked_example) {
  ob_log *log = log_of(
      "[{\"type\":\"data\",\"data\":{\"user\":{\"name\":\"Alex\",\"status\":\"active\"}}},"
      " {\"type\":\"data\",\"data\":{\"user\":{\"status\":\"inactive\"}},"
      "  \"_call\":{\"_tool\":\"updateUserStatus\",\"newStatus\":\"inactive\","
      "             \"_outputPath\":\"\xE2\x80\xA0" "data.user.status\"},"
      "  \"_date\":\"2025-01-01T00:00:00.000Z\"}]");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "data.user.status"), "\"inactive\"");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "data.user.name"), "\"Alex\"");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "data.user"), "{\"name\":\"Alex\",\"status\":\"inactive\"}");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "data"), "{\"user\":{\"name\":\"Alex\",\"status\":\"inactive\"}}");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "data.user.email"), "absent");
  CHECK_STR(read_now(log, "\xE2\x80\xA0" "state"), "absent");
  /* the output message was read with its path taken from _call._outputPath */
  CHECK_INT(ob_log_at(log, 1)->type, OB_MSG_OUTPUT);
  CHECK_STR(ob_string_ptr(ob_log_at(log, 1)->path), "user.status");
  ob_log_free(log);
}

TEST(present_includes_null_false_zero_empty) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"n\":null,\"f\":false,\"z\":0,\"e\":\"\"}}]");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.n || \xE2\x80\xA0state.x"), "null");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.f || \xE2\x80\xA0state.x"), "false");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.z"), "0");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.e"), "\"\"");
  ob_log_free(log);
}

TEST(or_and_precedence) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"a\":1,\"b\":2}}]");
  /* && binds tighter: (x && a) || b -> x absent, so b */
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.x && \xE2\x80\xA0state.a || \xE2\x80\xA0state.b"), "2");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.a && \xE2\x80\xA0state.b"), "2");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.a && \xE2\x80\xA0state.x"), "absent");
  CHECK_STR(read_now(log, "  \xE2\x80\xA0state.x ||\xE2\x80\xA0state.a  "), "1");
  ob_log_free(log);
}

TEST(indices_and_bracketed_keys) {
  ob_log *log = log_of(
      "[{\"kind\":\"state\",\"data\":{\"items\":[\"a\",\"b\"],\"users\":{\"a.b@x.com\":{\"age\":7}},"
      "  \"m\":{\"01\":\"key01\",\"1\":\"key1\"}}}]");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.items.1"), "\"b\"");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.items.2"), "absent");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.items.01"), "absent"); /* not canonical */
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.items.x"), "absent");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.users[\"a.b@x.com\"].age"), "7");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.m.01"), "\"key01\""); /* digits on an object: a key */
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.m.1"), "\"key1\"");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.items.0.x"), "absent"); /* through a scalar */
  ob_log_free(log);
}

TEST(later_writes_cover_earlier_ones_only_where_they_write) {
  ob_log *log = log_of(
      "[{\"kind\":\"state\",\"data\":{\"a\":{\"x\":1,\"y\":2},\"b\":3}},"
      " {\"kind\":\"state\",\"data\":{\"a\":{\"x\":10}}},"
      " {\"kind\":\"state\",\"data\":{\"b\":{\"deep\":true}}, \"_path\":\"\"}]");
  CHECK_STR(read_now(log, "\xE2\x80\xA0state.a"), "absent"); /* the last set the whole document */
  CHECK_STR(read_now(log, "\xE2\x80\xA0state"), "{\"b\":{\"deep\":true}}");
  CHECK_STR(read_as(log, "\xE2\x80\xA0state.a", NULL, 2), "{\"x\":10,\"y\":2}");
  ob_log_free(log);
}

int main(void) {
  RUN(seeds_worked_example);
  RUN(present_includes_null_false_zero_empty);
  RUN(or_and_precedence);
  RUN(indices_and_bracketed_keys);
  RUN(later_writes_cover_earlier_ones_only_where_they_write);
  return TEST_END();
}
