/* test_log_context.c -- context messages in every accepted form compose into one
 * document per kind; malformed messages are refused with a clear reason. */
#include "testlog.h"

#define D "\xE2\x80\xA0"

TEST(all_forms_compose) {
  ob_log *log = log_of(
      "[{\"type\":\"data\",\"kind\":\"input\",\"data\":{\"a\":1,\"nested\":{\"x\":1}}},"
      " {\"type\":\"input\",\"data\":{\"b\":2,\"nested\":{\"y\":2}}},"
      " {\"type\":\"input\",\"customerId\":\"c1\",\"_note\":\"ignored\"},"
      " {\"kind\":\"input\",\"data\":{\"c\":3}},"
      " {\"data\":{\"user\":\"u\"}},"
      " {\"type\":\"data\",\"kind\":\"input\",\"d\":4}]");
  CHECK_STR(read_now(log, D "input"),
            "{\"a\":1,\"nested\":{\"x\":1,\"y\":2},\"b\":2,\"customerId\":\"c1\",\"c\":3,\"d\":4}");
  CHECK_STR(read_now(log, D "data.user"), "\"u\""); /* no kind: kind data */
  ob_log_free(log);
}

TEST(context_message_with_its_own_method) {
  ob_log *log = log_of(
      "[{\"type\":\"state\",\"data\":{\"a\":{\"x\":1},\"b\":1}},"
      " {\"type\":\"state\",\"data\":{\"a\":{\"y\":2}},\"_outputMethod\":\"assign\"},"
      " {\"type\":\"log\",\"data\":[],\"_outputMethod\":\"set\"},"
      " {\"type\":\"log\",\"data\":\"first\",\"_outputMethod\":\"push\"},"
      " {\"type\":\"log\",\"data\":[\"second\",\"third\"],\"_outputMethod\":\"concat\"}]");
  CHECK_STR(read_now(log, D "state"), "{\"a\":{\"y\":2},\"b\":1}");
  CHECK_STR(read_now(log, D "log"), "[\"first\",\"second\",\"third\"]");
  ob_log_free(log);
}

TEST(plan_messages_are_kept_but_write_nothing) {
  ob_log *log = log_of("[{\"type\":\"plan\",\"plan\":[{\"_tool\":\"x\"}]},{\"type\":\"state\",\"data\":{\"k\":1}}]");
  CHECK_INT(ob_log_len(log), 2);
  CHECK_INT(ob_log_at(log, 0)->type, OB_MSG_OTHER);
  CHECK_STR(read_now(log, D "plan"), "absent");
  CHECK_STR(read_now(log, D "state.k"), "1");
  ob_log_free(log);
}

TEST(schema_is_recorded_per_document) {
  ob_log *log = log_of("[{\"type\":\"state\",\"data\":{},\"schema\":{\"type\":\"object\"}},"
                       " {\"type\":\"state\",\"data\":{},\"schema\":{\"type\":\"array\"},\"_instance\":\"i\"}]");
  ob_value *g = ob_log_schema(log, "state", NULL, OB_LOG_NOW);
  ob_value *i = ob_log_schema(log, "state", "i", OB_LOG_NOW);
  ob_value *j = ob_log_schema(log, "state", "j", OB_LOG_NOW);
  CHECK(g && ob_typeof(g) == OB_OBJECT && i && i != g && j == g);
  CHECK(ob_log_schema(log, "state", NULL, 0) == NULL);
  ob_log_free(log);
}

static void refused(const char *msg, const char *needle) {
  ob_log *log = ob_log_new();
  char arr[512];
  snprintf(arr, sizeof arr, "[%s]", msg);
  ob_error err = {0};
  CHECK_INT(append_all(log, arr, &err), 1);
  CHECK_INT(ob_log_len(log), 0);
  if (!strstr(err.msg, needle)) {
    fprintf(stderr, "  %s: error \"%s\" lacks \"%s\"\n", msg, err.msg, needle);
    CHECK(0);
  }
  ob_log_free(log);
}

TEST(malformed_messages_are_refused) {
  refused("[1]", "must be a JSON object");
  refused("\"text\"", "must be a JSON object");
  refused("{\"type\":3}", "\"type\" must be a string");
  refused("{\"kind\":\"9lives\",\"data\":{}}", "is not a kind name");
  refused("{\"type\":\"state\",\"kind\":\"input\",\"data\":{}}", "disagrees");
  refused("{\"type\":\"state\",\"data\":{},\"_instance\":7}", "\"_instance\" must be a string");
  refused("{\"type\":\"state\",\"data\":{},\"_outputMethod\":\"append\"}", "must be one of");
  refused("{\"data\":{\"a\":1},\"_call\":{\"_tool\":\"t\"}}", "needs \"_path\"");
  refused("{\"data\":{\"a\":1},\"_call\":{\"_outputPath\":\"a || b\"}}", "is an expression");
  refused("{\"data\":{\"a\":1},\"_path\":\"b\"}", "holds nothing at its path \"b\"");
  refused("{\"data\":{\"a\":1},\"_path\":\"a..b\"}", "\"_path\"");
  refused("{\"type\":\"state\",\"data\":5,\"_outputMethod\":\"assign\"}", "assign needs an object");
}

int main(void) {
  RUN(all_forms_compose);
  RUN(context_message_with_its_own_method);
  RUN(plan_messages_are_kept_but_write_nothing);
  RUN(schema_is_recorded_per_document);
  RUN(malformed_messages_are_refused);
  return TEST_END();
}
