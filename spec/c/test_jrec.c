/* test_jrec.c -- the journal's vocabulary (ob_journal.c): ob_jrec_write prints each
 * record kind as one line, its members in the order the format gives (ob_journal.h),
 * the bytes the journals before it held; ob_jrec_parse reads each back (kinds,
 * members, scope numbers and paths), tells a message from a record (a "type" makes a
 * message), and refuses a scope record without its members. The message constructors
 * (ob_msg.c) give the messages' members in their order. */
#include "log/ob_journal.h"
#include "log/ob_msg.h"
#include "test.h"

static void check_line(const ob_jrec *r, const char *want) {
  ob_buf b;
  ob_buf_init(&b);
  ob_jrec_write(&b, r);
  CHECK_STR(b.data, want);
  ob_buf_free(&b);
}

static ob_value *parse(const char *text) {
  ob_error e;
  ob_value *v = ob_json_parse(text, strlen(text), &e);
  CHECK(v != NULL);
  return v;
}

TEST(every_kind_is_written_in_the_format_s_words) {
  check_line(&(ob_jrec){.kind = OB_JREC_START, .id = "#3", .attempt = 1, .t_us = 17},
             "{\"journal\":\"start\",\"id\":\"#3\",\"attempt\":1,\"t\":17}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_START, .scope = 4, .step = 2, .id = "a\"b",
                        .attempt = 12, .t_us = 1700000000123456u},
             "{\"journal\":\"start\",\"scope\":4,\"step\":2,\"id\":\"a\\\"b\",\"attempt\":12,"
             "\"t\":1700000000123456}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_RETRY, .id = "#0", .attempt = 2, .error = "boom",
                        .delay_ms = 250, .t_us = 9},
             "{\"journal\":\"retry\",\"id\":\"#0\",\"attempt\":2,\"error\":\"boom\","
             "\"delay_ms\":250,\"t\":9}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_SETTLED, .id = "#1", .state = "failed", .t_us = 5},
             "{\"journal\":\"settled\",\"id\":\"#1\",\"state\":\"failed\",\"t\":5}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_END, .exit = 0},
             "{\"journal\":\"end\",\"exit\":0}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_END, .exit = -1},
             "{\"journal\":\"end\",\"exit\":-1}\n");
  ob_value *out = parse("{\"a\":[1,2]}");
  check_line(&(ob_jrec){.kind = OB_JREC_END, .exit = 0, .output = out},
             "{\"journal\":\"end\",\"exit\":0,\"output\":{\"a\":[1,2]}}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_STEP, .step = 3},
             "{\"journal\":\"step\",\"step\":3}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_STEP, .step = 3, .problems = 2},
             "{\"journal\":\"step\",\"step\":3,\"problems\":2}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_RESUME}, "{\"journal\":\"resume\"}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_RUN, .tools = out, .loop = out},
             "{\"journal\":\"run\",\"tools\":{\"a\":[1,2]},\"loop\":{\"a\":[1,2]}}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_RUN, .scope = 7}, "{\"journal\":\"run\",\"scope\":7}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_SCOPE, .n = 2, .in = 1, .call = "#0"},
             "{\"journal\":\"scope\",\"n\":2,\"in\":1,\"call\":\"#0\"}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_SCOPE, .n = 1, .path = "step 3/#1"},
             "{\"journal\":\"scope\",\"n\":1,\"path\":\"step 3/#1\"}\n");
  check_line(&(ob_jrec){.kind = OB_JREC_MSG, .scope = 2, .msg = out},
             "{\"journal\":\"msg\",\"scope\":2,\"msg\":{\"a\":[1,2]}}\n");
  ob_buf b; /* a message printed in place */
  ob_buf_init(&b);
  ob_jrec_msg_open(&b, &(ob_jrec){.kind = OB_JREC_MSG, .scope = 2});
  ob_buf_add(&b, "{}", 2);
  ob_jrec_msg_close(&b);
  CHECK_STR(b.data, "{\"journal\":\"msg\",\"scope\":2,\"msg\":{}}\n");
  ob_buf_free(&b);
  ob_unref(out);
}

TEST(each_record_reads_back_as_written) {
  ob_jrec kinds[] = {
      {.kind = OB_JREC_START, .scope = 3, .step = 2, .id = "#3", .attempt = 4, .t_us = 99},
      {.kind = OB_JREC_RETRY, .id = "#0", .attempt = 2, .error = "x", .delay_ms = 7, .t_us = 8},
      {.kind = OB_JREC_SETTLED, .id = "#1", .state = "done", .t_us = 5},
      {.kind = OB_JREC_END, .exit = 3},
      {.kind = OB_JREC_STEP, .step = 5, .problems = 1},
      {.kind = OB_JREC_RESUME},
      {.kind = OB_JREC_SCOPE, .n = 2, .in = 1, .call = "#0"},
      {.kind = OB_JREC_SCOPE, .n = 9, .path = "#1/#0"},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
    const ob_jrec *w = &kinds[i];
    ob_buf b;
    ob_buf_init(&b);
    ob_jrec_write(&b, w);
    ob_value *v = parse(b.data);
    ob_jrec r;
    ob_error err;
    CHECK_INT(ob_jrec_parse(v, &r, &err), 1);
    CHECK_INT(r.kind, w->kind);
    CHECK_STR(r.what, ob_jrec_name(w->kind));
    CHECK_INT(r.scope, w->scope);
    CHECK_INT(r.step, w->step);
    CHECK_INT(r.t_us, w->t_us);
    CHECK_INT(r.delay_ms, w->delay_ms);
    CHECK_INT(r.problems, w->problems);
    CHECK_INT(r.n, w->n);
    CHECK_INT(r.in, w->in);
    if (w->id)
      CHECK_STR(r.id, w->id);
    if (w->state)
      CHECK_STR(r.state, w->state);
    if (w->error)
      CHECK_STR(r.error, w->error);
    if (w->call)
      CHECK_STR(r.call, w->call);
    if (w->path)
      CHECK_STR(r.path, w->path);
    if (w->kind == OB_JREC_START || w->kind == OB_JREC_RETRY) {
      CHECK(r.has_attempt);
      CHECK_INT(r.attempt, w->attempt);
    }
    if (w->kind == OB_JREC_END) {
      CHECK(r.has_exit);
      CHECK_INT(r.exit, w->exit);
    }
    ob_unref(v);
    ob_buf_free(&b);
  }
}

TEST(messages_and_records_are_told_apart) {
  ob_jrec r;
  ob_error err;
  const char *messages[] = {"{\"type\":\"state\",\"journal\":\"start\"}", "[1]", "3",
                            "{\"journal\":7}", "{\"type\":\"plan\",\"plan\":[]}"};
  for (size_t i = 0; i < sizeof messages / sizeof *messages; i++) {
    ob_value *v = parse(messages[i]);
    CHECK_INT(ob_jrec_parse(v, &r, &err), 0);
    CHECK_INT(r.kind, OB_JREC_NONE);
    ob_unref(v);
  }
  ob_value *v = parse("{\"journal\":\"checkpoint\",\"id\":\"#2\"}"); /* a later version's */
  CHECK_INT(ob_jrec_parse(v, &r, &err), 1);
  CHECK_INT(r.kind, OB_JREC_OTHER);
  CHECK_STR(r.what, "checkpoint");
  CHECK_STR(r.id, "#2");
  CHECK_STR(ob_jrec_name(r.kind), "");
  ob_unref(v);
  v = parse("{\"journal\":\"msg\",\"scope\":\"#1/#0\",\"msg\":{\"type\":\"plan\"}}");
  CHECK_INT(ob_jrec_parse(v, &r, &err), 1); /* a scope as a path: journals before numbers */
  CHECK_INT(r.kind, OB_JREC_MSG);
  CHECK_STR(r.scope_path, "#1/#0");
  CHECK_INT(r.scope, 0);
  CHECK(r.msg && ob_typeof(r.msg) == OB_OBJECT);
  ob_unref(v);
  v = parse("{\"journal\":\"start\",\"id\":\"#0\",\"attempt\":\"x\",\"t\":-5}");
  CHECK_INT(ob_jrec_parse(v, &r, &err), 1); /* members of another type read as absent */
  CHECK(!r.has_attempt);
  CHECK_INT(r.t_us, 0);
  ob_unref(v);
}

TEST(a_scope_record_without_its_members_is_refused) {
  const char *bad[] = {"{\"journal\":\"scope\",\"n\":1}", "{\"journal\":\"scope\",\"path\":\"#0\"}",
                       "{\"journal\":\"scope\",\"n\":2,\"in\":1}",
                       "{\"journal\":\"scope\",\"n\":0,\"path\":\"#0\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ob_value *v = parse(bad[i]);
    ob_jrec r;
    ob_error err;
    CHECK_INT(ob_jrec_parse(v, &r, &err), OB_EINVAL);
    CHECK(strstr(err.msg, "a scope record needs") != NULL);
    ob_unref(v);
  }
}

static void check_json(ob_value *m, const char *want) {
  ob_buf b;
  ob_buf_init(&b);
  ob_json_write(&b, m, OB_JSON_COMPACT);
  CHECK_STR(b.data, want);
  ob_buf_free(&b);
  ob_unref(m);
}

TEST(the_message_constructors_give_members_in_order) {
  ob_value *plan = parse("[{\"tool\":\"t\"}]");
  check_json(ob_msg_plan(plan, "p.json"),
             "{\"type\":\"plan\",\"file\":\"p.json\",\"plan\":[{\"tool\":\"t\"}]}");
  check_json(ob_msg_data(ob_cstring("input"), ob_int(1), NULL),
             "{\"type\":\"data\",\"kind\":\"input\",\"data\":1}");
  check_json(ob_msg_data(ob_cstring("k"), ob_int(2), ob_cstring("i1")),
             "{\"type\":\"data\",\"kind\":\"k\",\"_instance\":\"i1\",\"data\":2}");
  ob_value *call = parse("{\"tool\":\"t\"}"), *sub = parse("[]");
  check_json(ob_msg_error(call, "#0", "boom", "runtime", 1, "i", sub),
             "{\"type\":\"data\",\"kind\":\"error\",\"_instance\":\"i\",\"data\":{\"call\":"
             "{\"tool\":\"t\"},\"id\":\"#0\",\"error\":\"boom\",\"phase\":\"runtime\","
             "\"detached\":true},\"_log\":[]}");
  check_json(ob_msg_error(call, "#1", "no", "validation", 0, NULL, NULL),
             "{\"type\":\"data\",\"kind\":\"error\",\"data\":{\"call\":{\"tool\":\"t\"},"
             "\"id\":\"#1\",\"error\":\"no\",\"phase\":\"validation\"}}");
  check_json(ob_msg_problem("bad plan", 4),
             "{\"type\":\"data\",\"kind\":\"error\",\"data\":{\"error\":\"bad plan\","
             "\"phase\":\"validation\",\"step\":4}}");
  ob_unref(plan);
  ob_unref(call);
  ob_unref(sub);
}

int main(void) {
  RUN(every_kind_is_written_in_the_format_s_words);
  RUN(each_record_reads_back_as_written);
  RUN(messages_and_records_are_told_apart);
  RUN(a_scope_record_without_its_members_is_refused);
  RUN(the_message_constructors_give_members_in_order);
  return TEST_END();
}
