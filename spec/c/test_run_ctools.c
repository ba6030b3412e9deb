/* test_run_ctools.c -- tools written in C (ob_engine_add_tool): completing at once,
 * later from a timer on the loop, with an error, or choosing an || alternative. */
#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "test.h"

static void add_one(ob_call_handle *h, const ob_value *params, void *data) {
  (void)data;
  ob_value *x = ob_object_get(params, "x", 1);
  ob_value *r = ob_int(ob_int_value(x) + 1);
  ob_call_complete(h, 0, r, NULL);
  ob_unref(r);
}

typedef struct later {
  uv_timer_t timer;
  ob_call_handle *h;
} later;

static void later_closed(uv_handle_t *t) { free(t); }

static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  ob_value *r = ob_cstring(ob_call_handle_id(l->h));
  ob_call_complete(l->h, 0, r, NULL);
  ob_unref(r);
  uv_close((uv_handle_t *)t, later_closed);
}

static void wait_then_answer(ob_call_handle *h, const ob_value *params, void *data) {
  later *l = malloc(sizeof *l);
  l->h = h;
  uv_timer_init((uv_loop_t *)data, &l->timer);
  uv_timer_start(&l->timer, later_fire, (uint64_t)ob_int_value(ob_object_get(params, "ms", 2)), 0);
}

static void refuse(ob_call_handle *h, const ob_value *params, void *data) {
  (void)params, (void)data;
  ob_call_complete(h, 0, NULL, "no, from C");
}

static void second(ob_call_handle *h, const ob_value *params, void *data) {
  (void)params, (void)data;
  ob_value *v = ob_true();
  ob_call_complete(h, 1, v, NULL);
}

static ob_value *run_plan(ob_engine *e, const char *json, int *failed) {
  ob_error err;
  ob_value *pv = ob_json_parse(json, strlen(json), &err);
  ob_plan *p = ob_plan_from_value(pv, "test.json");
  ob_plan_check_tools(p, &e->tools, 0);
  for (size_t i = 0; i < p->nerrors; i++)
    fprintf(stderr, "  %s\n", p->errors[i]);
  ob_run_options ro = {.concurrency = 0};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  ob_value *out = ob_run_output(r);
  *failed = ob_run_failed(r);
  ob_run_free(r);
  ob_plan_free(p);
  ob_unref(pv);
  return out;
}

static const char *as_text(ob_value *v) {
  static char buf[512];
  char *s = ob_json_print(v, 0, NULL);
  snprintf(buf, sizeof buf, "%s", s);
  free(s);
  ob_unref(v);
  return buf;
}

TEST(c_tools_complete_now_later_with_errors_and_branches) {
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  ob_value *schema = ob_json_parse("{\"required\":[\"x\"]}", 17, &err);
  CHECK(ob_engine_add_tool(e, "add_one", schema, add_one, NULL, &err) == OB_OK);
  CHECK(ob_engine_add_tool(e, "later", NULL, wait_then_answer, e->loop, &err) == OB_OK);
  CHECK(ob_engine_add_tool(e, "refuse", NULL, refuse, NULL, &err) == OB_OK);
  CHECK(ob_engine_add_tool(e, "second", NULL, second, NULL, &err) == OB_OK);
  CHECK(ob_engine_add_tool(e, "add_one", NULL, add_one, NULL, &err) == OB_EINVAL); /* twice */
  ob_unref(schema);
  int failed;
  CHECK_STR(as_text(run_plan(e,
                             "[{\"_tool\":\"add_one\",\"x\":1,\"_outputPath\":\"a\"},"
                             " {\"_tool\":\"add_one\",\"x\":\"\xE2\x80\xA0state.a\",\"_outputPath\":\"b\"},"
                             " {\"_id\":\"slow\",\"_tool\":\"later\",\"ms\":5,\"_outputPath\":\"c\"},"
                             " {\"_tool\":\"second\",\"_outputPath\":\"d || e\"},"
                             " {\"_tool\":\"refuse\",\"_outputPath\":\"ok || why\"}]",
                             &failed)),
            /* keys in the plan's order (ob_order.h), whichever call wrote first */
            "{\"a\":2,\"b\":3,\"c\":\"slow\",\"e\":true,\"why\":{\"error\":\"no, from C\","
            "\"tool\":\"refuse\",\"call\":\"#4\"}}");
  CHECK_INT(failed, 0);
  CHECK_STR(as_text(run_plan(e, "[{\"_tool\":\"refuse\",\"_outputPath\":\"x\"}]", &failed)), "{}");
  CHECK_INT(failed, 1);
  ob_engine_free(e);
}

int main(void) {
  RUN(c_tools_complete_now_later_with_errors_and_branches);
  return TEST_END();
}
