/* test_run_slice.c -- a tool that never yields is stopped with an error after the
 * run's time slice, and the rest of the plan goes on; one that yields in time runs on. */
#include <stdio.h>
#include <unistd.h>

#include <signal.h>
#include <string.h>

#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "bridge/ob_watch.h"
#include "test.h"

/* Runs plan_json with the tools of tools_lua under a slice of limit_ms; returns
 * the final output as JSON text (malloc'ed) and whether the run failed. */
static char *run_with_slice(const char *tools_lua, const char *plan_json, unsigned limit_ms,
                            int *failed) {
  char dir[] = "/tmp/obelus-slice-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char file[64];
  snprintf(file, sizeof file, "%s/tools.lua", dir);
  FILE *f = fopen(file, "w");
  fputs(tools_lua, f);
  fclose(f);
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(ob_engine_load_tools(e, file, &err) == OB_OK);
  ob_value *pv = ob_json_parse(plan_json, strlen(plan_json), &err);
  CHECK(pv != NULL);
  ob_plan *p = ob_plan_from_value(pv, "slice.json");
  ob_plan_check_tools(p, &e->tools, 0);
  CHECK(p->nerrors == 0);
  ob_run_options ro = {.max_slice_ms = limit_ms};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK(ob_run_finished(r));
  *failed = ob_run_failed(r);
  ob_value *out = ob_run_output(r);
  char *text = ob_json_print(out, 0, NULL);
  ob_unref(out);
  ob_run_free(r);
  ob_plan_free(p);
  ob_unref(pv);
  ob_engine_free(e);
  unlink(file);
  rmdir(dir);
  return text;
}

TEST(endless_tool_is_stopped) {
  int failed;
  char *text = run_with_slice(
      "return {\n"
      "  { name = \"spin\", run = function() local x = 0 while true do x = x + 1 end end },\n"
      "  { name = \"ok\", run = function() return 1 end },\n"
      "}\n",
      "[{\"_tool\":\"spin\",\"_outputPath\":\"a\"},"
      " {\"_tool\":\"spin\",\"_outputPath\":\"b || why\"},"
      " {\"_tool\":\"ok\",\"_outputPath\":\"c\"}]",
      100, &failed);
  CHECK(failed); /* the first spin: a runtime error */
  CHECK(strstr(text, "\"c\":1") != NULL);
  CHECK(strstr(text, "\"why\":{\"error\":") != NULL);
  CHECK(strstr(text, "without yielding") != NULL);
  free(text);
}

/* The limit is per slice (from one resume to the next yield), not per call:
 * a tool busy for 200 x 2 ms of CPU with sleeps in between (400 ms in all, past
 * the limit whatever the load) runs to the end under a 300 ms limit (150 times a
 * slice: a loaded machine's slowdown does not reach it), and so does the call
 * after it on the same coroutine. */
TEST(yielding_tool_runs_past_the_limit_in_total) {
  int failed;
  char *text = run_with_slice("local obelus = require \"obelus\"\n"
                              "return { name = \"busy\", run = function(call)\n"
                              "  local n = 0\n"
                              "  for _ = 1, 200 do\n"
                              "    local t0 = os.clock()\n"
                              "    while os.clock() - t0 < 0.002 do n = n + 1 end\n"
                              "    obelus.sleep(1)\n"
                              "  end\n"
                              "  return n > 0\n"
                              "end }\n",
                              "[{\"_tool\":\"busy\",\"_outputPath\":\"a\"},"
                              " {\"_tool\":\"busy\",\"_outputPath\":\"b\","
                              "\"after\":\"\xe2\x80\xa0state.a\"}]",
                              300, &failed);
  CHECK(!failed);
  CHECK(strcmp(text, "{\"a\":true,\"b\":true}") == 0);
  free(text);
}

/* An endless tool, and a call of it whose error goes to "why". */
static const char spin_tool[] =
    "return { name = \"spin\", run = function() while true do end end }\n";
static const char spin_to_why[] = "[{\"_tool\":\"spin\",\"_outputPath\":\"a || why\"}]";

/* A limit shorter than the watchdog's shortest period (5 ms) still stops a tool. */
TEST(tiny_limit_still_stops) {
  int failed;
  char *text = run_with_slice(spin_tool, spin_to_why, 2, &failed);
  CHECK(!failed);
  CHECK(strstr(text, "the tool ran 2 ms without yielding") != NULL);
  free(text);
}

/* A host that handles the watchdog's signal itself keeps it: the engine
 * then stops endless tools with a count hook instead (last: it leaves the
 * process without the watchdog). */
static volatile sig_atomic_t host_signals;
static void host_handler(int sig) {
  (void)sig;
  host_signals++;
}

TEST(host_keeps_its_signal_and_tools_are_still_stopped) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = host_handler;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(OB_WATCH_SIGNAL, &sa, NULL) == 0);
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(e && e->watch == NULL); /* no watch: the fallback */
  ob_engine_free(e);
  int failed;
  char *text = run_with_slice(spin_tool, spin_to_why, 100, &failed);
  CHECK(!failed);
  CHECK(strstr(text, "without yielding") != NULL);
  free(text);
  struct sigaction now;
  CHECK(sigaction(OB_WATCH_SIGNAL, NULL, &now) == 0);
  CHECK(now.sa_handler == host_handler); /* still the host's */
  CHECK(host_signals == 0);
}

int main(void) {
  RUN(endless_tool_is_stopped);
  RUN(yielding_tool_runs_past_the_limit_in_total);
  RUN(tiny_limit_still_stops);
  RUN(host_keeps_its_signal_and_tools_are_still_stopped);
  return TEST_END();
}
