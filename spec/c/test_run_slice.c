/* test_run_slice.c -- a tool that never yields is stopped with an error after the
 * run's time slice, and the rest of the plan goes on. */
#include <stdio.h>
#include <unistd.h>

#include "ob_engine.h"
#include "ob_run.h"
#include "test.h"

TEST(endless_tool_is_stopped) {
  char dir[] = "/tmp/obelus-slice-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char file[64];
  snprintf(file, sizeof file, "%s/spin.lua", dir);
  FILE *f = fopen(file, "w");
  fputs("return {\n"
        "  { name = \"spin\", run = function() local x = 0 while true do x = x + 1 end end },\n"
        "  { name = \"ok\", run = function() return 1 end },\n"
        "}\n",
        f);
  fclose(f);
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(ob_engine_load_tools(e, file, &err) == OB_OK);
  const char *json = "[{\"_tool\":\"spin\",\"_outputPath\":\"a\"},"
                     " {\"_tool\":\"spin\",\"_outputPath\":\"b || why\"},"
                     " {\"_tool\":\"ok\",\"_outputPath\":\"c\"}]";
  ob_value *pv = ob_json_parse(json, strlen(json), &err);
  ob_plan *p = ob_plan_from_value(pv, "slice.json");
  ob_plan_check_tools(p, &e->tools, 0);
  ob_run_options ro = {.max_slice_ms = 100};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK(ob_run_finished(r));
  CHECK(ob_run_failed(r)); /* the first spin: a runtime error */
  ob_value *out = ob_run_output(r);
  char *text = ob_json_print(out, 0, NULL);
  CHECK(strstr(text, "\"c\":1") != NULL);
  CHECK(strstr(text, "\"why\":{\"error\":") != NULL);
  CHECK(strstr(text, "without yielding") != NULL);
  free(text);
  ob_unref(out);
  ob_run_free(r);
  ob_plan_free(p);
  ob_unref(pv);
  ob_engine_free(e);
  unlink(file);
  rmdir(dir);
}

/* The limit is per slice (from one resume to the next yield), not per call:
 * a tool busy for 5 x 60 ms with sleeps in between runs to the end under a
 * 100 ms limit, and so does the call after it on the same coroutine. */
TEST(yielding_tool_runs_past_the_limit_in_total) {
  char dir[] = "/tmp/obelus-slice-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char file[64];
  snprintf(file, sizeof file, "%s/busy.lua", dir);
  FILE *f = fopen(file, "w");
  fputs("local obelus = require \"obelus\"\n"
        "return { name = \"busy\", run = function(call)\n"
        "  local n = 0\n"
        "  for _ = 1, 5 do\n"
        "    local t0 = os.clock()\n"
        "    while os.clock() - t0 < 0.06 do n = n + 1 end\n"
        "    obelus.sleep(1)\n"
        "  end\n"
        "  return n > 0\n"
        "end }\n",
        f);
  fclose(f);
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(ob_engine_load_tools(e, file, &err) == OB_OK);
  const char *json = "[{\"_tool\":\"busy\",\"_outputPath\":\"a\"},"
                     " {\"_tool\":\"busy\",\"_outputPath\":\"b\",\"after\":\"â state.a\"}]";
  ob_value *pv = ob_json_parse(json, strlen(json), &err);
  CHECK(pv != NULL);
  ob_plan *p = ob_plan_from_value(pv, "slice.json");
  ob_plan_check_tools(p, &e->tools, 0);
  CHECK(p->nerrors == 0);
  ob_run_options ro = {.max_slice_ms = 100};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK(ob_run_finished(r));
  CHECK(!ob_run_failed(r));
  ob_value *out = ob_run_output(r);
  char *text = ob_json_print(out, 0, NULL);
  CHECK(strcmp(text, "{\"a\":true,\"b\":true}") == 0);
  free(text);
  ob_unref(out);
  ob_run_free(r);
  ob_plan_free(p);
  ob_unref(pv);
  ob_engine_free(e);
  unlink(file);
  rmdir(dir);
}

int main(void) {
  RUN(endless_tool_is_stopped);
  RUN(yielding_tool_runs_past_the_limit_in_total);
  return TEST_END();
}
