/* test_log_instances.c -- instance views (plan-format §6): global deep-merged with the
 * instance's own document, instance winning; writes stay in the instance and are
 * computed from its view (copy-on-write). */
#include "testlog.h"

#define D "\xE2\x80\xA0"

static ob_log *base(void) {
  return log_of(
      "[{\"type\":\"input\",\"data\":{\"lang\":\"en\",\"cfg\":{\"a\":1,\"b\":2},\"tags\":[\"g\"]}},"
      " {\"type\":\"input\",\"data\":{\"lang\":\"fr\",\"cfg\":{\"b\":20}},\"_instance\":\"i1\"},"
      " {\"type\":\"input\",\"data\":{\"user\":\"bob\"},\"_instance\":\"i2\"}]");
}

TEST(view_is_global_merged_with_instance) {
  ob_log *log = base();
  CHECK_STR(read_as(log, D "input.lang", "i1", OB_LOG_NOW), "\"fr\"");
  CHECK_STR(read_as(log, D "input.lang", "i2", OB_LOG_NOW), "\"en\""); /* fallback to global */
  CHECK_STR(read_as(log, D "input.cfg", "i1", OB_LOG_NOW), "{\"a\":1,\"b\":20}");
  CHECK_STR(read_as(log, D "input.cfg.a", "i1", OB_LOG_NOW), "1");
  CHECK_STR(read_as(log, D "input", "i2", OB_LOG_NOW),
            "{\"lang\":\"en\",\"cfg\":{\"a\":1,\"b\":2},\"tags\":[\"g\"],\"user\":\"bob\"}");
  CHECK_STR(read_now(log, D "input.user"), "absent"); /* global never sees instances */
  CHECK_STR(read_as(log, D "input.user", "i3", OB_LOG_NOW), "absent");
  ob_log_free(log);
}

static long write_in(ob_log *log, const char *inst, const char *path, ob_method m, const char *json) {
  ob_path p;
  ob_error err;
  ob_path_parse(path, strlen(path), &p, &err);
  ob_value *v = ob_json_parse(json, strlen(json), &err);
  long rc = ob_log_append_output(log, "input", inst, &p, m, v, NULL, &err);
  ob_unref(v);
  ob_path_free(&p);
  return rc;
}

TEST(push_onto_global_array_copies_on_write) {
  ob_log *log = base();
  CHECK(write_in(log, "i1", "tags", OB_METHOD_PUSH, "\"mine\"") >= 0);
  CHECK_STR(read_as(log, D "input.tags", "i1", OB_LOG_NOW), "[\"g\",\"mine\"]");
  CHECK_STR(read_as(log, D "input.tags", "i2", OB_LOG_NOW), "[\"g\"]");
  CHECK_STR(read_now(log, D "input.tags"), "[\"g\"]");
  ob_log_free(log);
}

TEST(write_into_global_array_element_copies_the_array) {
  ob_log *log = log_of("[{\"type\":\"state\",\"data\":{\"l\":[{\"v\":1},{\"v\":2}]}}]");
  ob_path p;
  ob_error err;
  ob_path_parse("l.1.v", 5, &p, &err);
  ob_value *v = ob_int(9);
  CHECK(ob_log_append_output(log, "state", "x", &p, OB_METHOD_SET, v, NULL, &err) >= 0);
  CHECK_STR(read_as(log, D "state.l", "x", OB_LOG_NOW), "[{\"v\":1},{\"v\":9}]");
  CHECK_STR(read_now(log, D "state.l"), "[{\"v\":1},{\"v\":2}]");
  ob_unref(v);
  ob_path_free(&p);
  ob_log_free(log);
}

TEST(two_instances_writing_the_same_path_stay_apart) {
  ob_log *log = base();
  CHECK(write_in(log, "i1", "result", OB_METHOD_SET, "\"one\"") >= 0);
  CHECK(write_in(log, "i2", "result", OB_METHOD_SET, "\"two\"") >= 0);
  CHECK(write_in(log, "i1", "cfg", OB_METHOD_MERGE, "{\"c\":3}") >= 0);
  CHECK_STR(read_as(log, D "input.result", "i1", OB_LOG_NOW), "\"one\"");
  CHECK_STR(read_as(log, D "input.result", "i2", OB_LOG_NOW), "\"two\"");
  CHECK_STR(read_as(log, D "input.cfg", "i1", OB_LOG_NOW), "{\"a\":1,\"b\":20,\"c\":3}");
  CHECK_STR(read_as(log, D "input.cfg", "i2", OB_LOG_NOW), "{\"a\":1,\"b\":2}");
  CHECK_STR(read_now(log, D "input.result"), "absent");
  ob_log_free(log);
}

TEST(instance_write_errors_are_judged_on_the_view) {
  ob_log *log = base();
  CHECK(write_in(log, "i2", "lang.x", OB_METHOD_SET, "1") < 0); /* through the global string */
  CHECK(write_in(log, "i1", "cfg", OB_METHOD_PUSH, "1") < 0);   /* onto the merged object */
  CHECK_INT(ob_log_len(log), 3);
  ob_log_free(log);
}

TEST(instance_context_keeps_only_its_own_part) {
  /* the instance's context comes first; global writes after it still show through */
  ob_log *log = log_of("[{\"type\":\"input\",\"data\":{\"lang\":\"fr\",\"cfg\":{\"a\":10}},\"_instance\":\"x\"},"
                       " {\"type\":\"input\",\"data\":{\"lang\":\"en\",\"cfg\":{\"a\":1,\"b\":2}}},"
                       " {\"type\":\"input\",\"data\":{\"cfg\":{\"c\":3}}}]");
  CHECK_STR(read_as(log, D "input", "x", OB_LOG_NOW), "{\"lang\":\"fr\",\"cfg\":{\"a\":10,\"b\":2,\"c\":3}}");
  CHECK(write_in(log, "x", "cfg", OB_METHOD_MERGE, "{\"d\":4}") >= 0);
  CHECK(write_in(log, NULL, "cfg", OB_METHOD_MERGE, "{\"e\":5}") >= 0);
  CHECK_STR(read_as(log, D "input.cfg", "x", OB_LOG_NOW), "{\"a\":10,\"b\":2,\"c\":3,\"e\":5,\"d\":4}");
  ob_log_free(log);
}

TEST(time_travel_sees_the_first_n_messages) {
  ob_log *log = log_of(
      "[{\"type\":\"state\",\"data\":{\"n\":0}},"
      " {\"type\":\"plan\",\"plan\":[]},"
      " {\"type\":\"state\",\"data\":{\"n\":1}},"
      " {\"type\":\"state\",\"data\":{\"n\":2},\"_instance\":\"i\"},"
      " {\"type\":\"state\",\"data\":{\"n\":3}}]");
  const char *global[] = {"absent", "0", "0", "1", "1", "3"};
  const char *inst[] = {"absent", "0", "0", "1", "2", "2"};
  for (size_t at = 0; at <= 5; at++) {
    CHECK_STR(read_as(log, D "state.n", NULL, at), global[at]);
    CHECK_STR(read_as(log, D "state.n", "i", at), inst[at]);
  }
  CHECK_STR(read_as(log, D "state.n", NULL, 99), "3");
  ob_log_free(log);
}

int main(void) {
  RUN(view_is_global_merged_with_instance);
  RUN(push_onto_global_array_copies_on_write);
  RUN(write_into_global_array_element_copies_the_array);
  RUN(two_instances_writing_the_same_path_stay_apart);
  RUN(instance_write_errors_are_judged_on_the_view);
  RUN(instance_context_keeps_only_its_own_part);
  RUN(time_travel_sees_the_first_n_messages);
  return TEST_END();
}
