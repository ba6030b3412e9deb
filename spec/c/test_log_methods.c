/* test_log_methods.c -- the output methods of plan-format §4 and each of their errors:
 * an error appends nothing and leaves every document as it was. */
#include "testlog.h"

#define D "\xE2\x80\xA0"

/* Appends one output message writing `value` at `path` with `method`. */
static long out(ob_log *log, const char *path, const char *method, const char *value, ob_error *err) {
  ob_path p;
  ob_error perr;
  if (ob_path_parse(path, strlen(path), &p, &perr) != OB_OK)
    abort();
  ob_value *v = ob_json_parse(value, strlen(value), &perr);
  long rc = ob_log_append_output(log, "state", NULL, &p,
                                 (ob_method)ob_method_parse(method, strlen(method)), v, NULL, err);
  ob_unref(v);
  ob_path_free(&p);
  return rc;
}

TEST(set_replaces) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"a\":{\"x\":1}}}]");
  ob_error err;
  CHECK(out(log, "a", "set", "{\"y\":2}", &err) == 1);
  CHECK_STR(read_now(log, D "state.a"), "{\"y\":2}");
  ob_log_free(log);
}

TEST(merge_is_deep_and_non_objects_replace) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"a\":{\"x\":{\"p\":1,\"q\":2},\"l\":[1,2],\"s\":1}}}]");
  ob_error err;
  CHECK(out(log, "a", "merge", "{\"x\":{\"q\":3,\"r\":4},\"l\":[9],\"s\":null,\"n\":true}", &err) == 1);
  CHECK_STR(read_now(log, D "state.a"), "{\"x\":{\"p\":1,\"q\":3,\"r\":4},\"l\":[9],\"s\":null,\"n\":true}");
  CHECK(out(log, "a", "merge", "[1]", &err) == 2);
  CHECK_STR(read_now(log, D "state.a"), "[1]");
  CHECK(out(log, "fresh", "merge", "{\"k\":1}", &err) == 3);
  CHECK_STR(read_now(log, D "state.fresh"), "{\"k\":1}");
  ob_log_free(log);
}

TEST(assign_is_shallow) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"a\":{\"x\":{\"p\":1},\"y\":2}}}]");
  ob_error err;
  CHECK(out(log, "a", "assign", "{\"x\":{\"q\":1}}", &err) == 1);
  CHECK_STR(read_now(log, D "state.a"), "{\"x\":{\"q\":1},\"y\":2}");
  CHECK(out(log, "b", "assign", "{\"k\":1}", &err) == 2); /* absent counts as {} */
  CHECK_STR(read_now(log, D "state.b"), "{\"k\":1}");
  ob_log_free(log);
}

TEST(push_and_concat) {
  ob_log *log = ob_log_new();
  ob_error err;
  CHECK(out(log, "l", "push", "1", &err) == 0); /* absent counts as [] */
  CHECK(out(log, "l", "push", "[2,3]", &err) == 1); /* one element, an array */
  CHECK(out(log, "l", "concat", "[4,5]", &err) == 2);
  CHECK(out(log, "l", "concat", "[]", &err) == 3);
  CHECK_STR(read_now(log, D "state.l"), "[1,[2,3],4,5]");
  CHECK(out(log, "c", "concat", "[\"a\"]", &err) == 4);
  CHECK_STR(read_now(log, D "state.c"), "[\"a\"]");
  ob_log_free(log);
}

TEST(array_indices_in_paths) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"l\":[{\"v\":1},{\"v\":2}]}}]");
  ob_error err;
  CHECK(out(log, "l.1.v", "set", "20", &err) == 1);
  CHECK(out(log, "l.2", "set", "\"appended\"", &err) == 2); /* index == length appends */
  CHECK_STR(read_now(log, D "state.l"), "[{\"v\":1},{\"v\":20},\"appended\"]");
  CHECK(out(log, "m.0.x", "set", "1", &err) == 3); /* a digit segment on a new object: a key */
  CHECK_STR(read_now(log, D "state.m"), "{\"0\":{\"x\":1}}");
  ob_log_free(log);
}

/* Each failing write: a negative code, err naming the problem, nothing appended. */
static void check_fails(const char *path, const char *method, const char *value, const char *needle) {
  ob_log *log = log_of("[{\"kind\":\"state\",\"data\":{\"s\":\"str\",\"n\":5,\"o\":{},\"l\":[1]}}]");
  ob_error err = {0};
  long rc = out(log, path, method, value, &err);
  CHECK(rc < 0);
  CHECK_INT(ob_log_len(log), 1);
  if (!strstr(err.msg, needle)) {
    fprintf(stderr, "  %s %s %s: error \"%s\" lacks \"%s\"\n", method, path, value, err.msg, needle);
    CHECK(0);
  }
  CHECK_STR(read_now(log, D "state"), "{\"s\":\"str\",\"n\":5,\"o\":{},\"l\":[1]}");
  ob_log_free(log);
}

TEST(errors_write_nothing) {
  check_fails("s.x", "set", "1", "cannot write through string at \"s.x\"");
  check_fails("n.x.y", "set", "1", "cannot write through integer at \"n.x\"");
  check_fails("s", "push", "1", "push onto string, not an array");
  check_fails("o", "concat", "[1]", "concat onto object, not an array");
  check_fails("l", "concat", "1", "concat needs an array value, got integer");
  check_fails("o", "assign", "[1]", "assign needs an object value, got array");
  check_fails("n", "assign", "{}", "assign onto integer, not an object");
  check_fails("l.5", "set", "1", "past the end");
  check_fails("l.x", "set", "1", "not an array index");
  check_fails("l.01", "set", "1", "not an array index");
}

TEST(failed_write_into_a_shared_document_without_history) {
  /* found by fuzz/fuzz_log: the root is shared with the context message's data,
   * the write fails below a copied level; the document must stay whole */
  ob_log *log = ob_log_new();
  ob_log_keep_history(log, 0);
  CHECK_INT(append_all(log, "[{\"user\":\"n\"}]", NULL), 0);
  ob_error err;
  CHECK_INT(append_all(log, "[{\"data\":{\"user\":{\"status\":\"x\"}},\"_path\":\"user.status\"}]", &err), 1);
  CHECK(strstr(err.msg, "cannot write through string") != NULL);
  CHECK_STR(read_now(log, D "data"), "{\"user\":\"n\"}");
  CHECK_INT(append_all(log, "[{\"data\":{\"user\":{\"status\":\"y\"}},\"_path\":\"user\"}]", &err), 0);
  CHECK_STR(read_now(log, D "data.user.status"), "\"y\"");
  ob_log_free(log);
}

TEST(too_deep_a_write_is_refused) {
  ob_log *log = ob_log_new();
  ob_error err;
  ob_value *v = ob_array();
  for (int i = 0; i < OB_MAX_DEPTH; i++)
    v = ob_array_push(ob_array(), v);
  ob_path p = {0, NULL};
  CHECK(ob_log_append_output(log, "state", NULL, &p, OB_METHOD_SET, v, NULL, &err) < 0);
  CHECK_INT(err.code, OB_EDEPTH);
  CHECK_INT(ob_log_len(log), 0);
  ob_unref(v);
  ob_log_free(log);
}

TEST(output_messages_carry_value_under_path) {
  ob_log *log = ob_log_new();
  ob_error err;
  const char *calltext = "{\"_tool\":\"t\",\"_outputPath\":\"user.tags\"}";
  ob_value *call = ob_json_parse(calltext, strlen(calltext), &err);
  ob_path p;
  ob_path_parse("user.tags", 9, &p, &err);
  ob_value *v = ob_cstring("x");
  CHECK(ob_log_append_output(log, "state", NULL, &p, OB_METHOD_PUSH, v, call, &err) == 0);
  ob_value *raw = ob_log_message(log, 0);
  char *s = ob_json_print(raw, 0, NULL);
  CHECK(strstr(s, "\"type\":\"data\",\"kind\":\"state\",\"data\":{\"user\":{\"tags\":\"x\"}},"
                  "\"_path\":\"user.tags\",\"_outputMethod\":\"push\",\"_call\":{") != NULL);
  CHECK(strstr(s, "\"_date\":\"20") != NULL);
  /* a message read back from its own JSON writes the same thing */
  ob_log *again = ob_log_new();
  CHECK(ob_log_append(again, raw, &err) == 0);
  CHECK_STR(read_now(again, D "state.user.tags"), "[\"x\"]");
  free(s);
  ob_unref(raw);
  ob_log_free(again);
  ob_unref(v);
  ob_unref(call);
  ob_path_free(&p);
  ob_log_free(log);
}

int main(void) {
  RUN(set_replaces);
  RUN(merge_is_deep_and_non_objects_replace);
  RUN(assign_is_shallow);
  RUN(push_and_concat);
  RUN(array_indices_in_paths);
  RUN(errors_write_nothing);
  RUN(failed_write_into_a_shared_document_without_history);
  RUN(too_deep_a_write_is_refused);
  RUN(output_messages_carry_value_under_path);
  return TEST_END();
}
