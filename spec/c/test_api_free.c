/* test_api_free.c -- obelus_engine_free on the host's loop while Lua tools still hold
 * libuv work through obelus.uv (luv): a timer a call waits on, a repeating timer a
 * finished call left running, a handle already closing with a Lua close callback, a
 * file request in flight. The handles are closed while the engine's Lua state lives
 * (their close callbacks run into it), and the state goes after them: nothing is read
 * after it is freed (ASan), nothing leaks, and the host's loop closes. */
#include <sys/stat.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64], tool_file[128], mark_file[128];

static const char *TOOLS =
    "local obelus = require 'obelus'\n"
    "local uv = obelus.uv\n"
    "local MARK = ...\n"
    "return {\n"
    "  { name = 'waits', run = function(c)\n"
    "      local t = uv.new_timer() -- never closed: the engine is freed while it runs\n"
    "      obelus.await(function(resume) t:start(c.ms, 0, function() resume() end) end)\n"
    "      return c.ms\n"
    "    end },\n"
    "  { name = 'ticker', run = function(c)\n"
    "      local n = 0\n"
    "      local t = uv.new_timer() -- left running after the call returns\n"
    "      t:start(1, 1, function() n = n + 1 end)\n"
    "      return c.ms\n"
    "    end },\n"
    "  { name = 'closing', run = function(c)\n"
    "      local t = uv.new_timer()\n"
    "      t:start(1000, 0, function() end)\n"
    "      t:close(function() -- runs while the engine is freed: Lua must still be there\n"
    "        local f = io.open(c.mark, 'w'); f:write('closed'); f:close()\n"
    "      end)\n"
    "      obelus.sleep(c.ms)\n"
    "      return c.ms\n"
    "    end },\n"
    "  { name = 'stats', run = function(c)\n"
    "      -- a request in flight when the engine goes, waking a call that is gone\n"
    "      obelus.await(function(resume) uv.fs_stat('/', function() resume() end) end)\n"
    "      obelus.sleep(c.ms)\n"
    "      return c.ms\n"
    "    end },\n"
    "}\n";

static obelus_engine *engine(uv_loop_t *loop) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tool_file), OBELUS_OK);
  return e;
}

static int done;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  (void)run, (void)status, (void)output, (void)data;
  done++;
}

static obelus_run *start(obelus_engine *e, const char *plan) {
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  return run;
}

/* Turns the loop n times without blocking, 1 ms apart. */
static void turns(uv_loop_t *loop, int n) {
  for (int i = 0; i < n; i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
}

TEST(freed_outside_the_loop_while_a_call_waits_on_a_tool_timer) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  done = 0;
  start(e, "[{\"_tool\":\"waits\",\"ms\":10000,\"_outputPath\":\"" DAGGER "state.a\"}]");
  turns(&loop, 3);
  CHECK_INT(done, 0);
  obelus_engine_free(e); /* the run goes with it; the tool's timer is still open */
  uv_run(&loop, UV_RUN_NOWAIT); /* once, as obelus.h asks */
  CHECK_INT(uv_loop_close(&loop), 0);
}

typedef struct freer {
  uv_timer_t t;
  obelus_engine *e;
} freer;

static void free_engine_from_timer(uv_timer_t *t) {
  freer *f = (freer *)t;
  obelus_engine_free(f->e); /* inside the host's loop (its own callback, not the engine's) */
  f->e = NULL;
  uv_close((uv_handle_t *)t, NULL);
}

TEST(freed_from_a_host_callback_while_a_finished_call_left_a_timer_ticking) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  done = 0;
  obelus_run *run =
      start(e, "[{\"_tool\":\"ticker\",\"ms\":1,\"_outputPath\":\"" DAGGER "state.a\"}]");
  turns(&loop, 5);
  CHECK_INT(done, 1);
  CHECK_INT(obelus_run_status(run), 0);
  freer f = {.e = e};
  uv_timer_init(&loop, &f.t);
  uv_timer_start(&f.t, free_engine_from_timer, 3, 0);
  uv_run(&loop, UV_RUN_DEFAULT); /* ends: the ticking timer was closed with the engine */
  CHECK(f.e == NULL);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(a_tool_handle_closing_with_a_lua_callback_finishes_before_lua_goes) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  unlink(mark_file);
  char plan[512];
  snprintf(plan, sizeof plan,
           "[{\"_tool\":\"closing\",\"ms\":10000,\"mark\":\"%s\",\"_outputPath\":\"" DAGGER
           "state.a\"}]",
           mark_file);
  start(e, plan);
  obelus_engine_free(e); /* before the loop turned: the close is still pending */
  uv_run(&loop, UV_RUN_NOWAIT);
  /* a handle closed before the engine was freed ends in a later turn than the
   * reaper's first look: the state waits one turn more */
  CHECK(access(mark_file, F_OK) == 0);
  CHECK_INT(uv_loop_close(&loop), UV_EBUSY);
  CHECK_INT(uv_run(&loop, UV_RUN_DEFAULT), 0);
  CHECK_INT(uv_loop_close(&loop), 0);
  CHECK(access(mark_file, F_OK) == 0); /* its Lua close callback ran */
  unlink(mark_file);
}

TEST(a_tool_request_in_flight_completes_before_lua_goes) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  start(e, "[{\"_tool\":\"stats\",\"ms\":10000,\"_outputPath\":\"" DAGGER "state.a\"},"
           " {\"_tool\":\"stats\",\"ms\":10000,\"_outputPath\":\"" DAGGER "state.b\"}]");
  obelus_engine_free(e); /* the stats are queued on libuv's threads */
  uv_run(&loop, UV_RUN_DEFAULT); /* until they called back and the engine let go */
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(many_engines_freed_with_open_tool_timers_on_one_loop) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *es[4];
  for (int i = 0; i < 4; i++) {
    es[i] = engine(&loop);
    start(es[i], "[{\"_tool\":\"waits\",\"ms\":10000,\"_outputPath\":\"" DAGGER "state.a\"},"
                 " {\"_tool\":\"ticker\",\"ms\":1,\"_outputPath\":\"" DAGGER "state.b\"}]");
  }
  turns(&loop, 3);
  for (int i = 0; i < 4; i++) {
    obelus_engine_free(es[i]);
    turns(&loop, 1); /* the others' timers go on meanwhile */
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-free-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(tool_file, sizeof tool_file, "%s/tools.lua", dir);
  snprintf(mark_file, sizeof mark_file, "%s/closed", dir);
  FILE *f = fopen(tool_file, "w");
  fputs(TOOLS, f);
  fclose(f);
  RUN(freed_outside_the_loop_while_a_call_waits_on_a_tool_timer);
  RUN(freed_from_a_host_callback_while_a_finished_call_left_a_timer_ticking);
  RUN(a_tool_handle_closing_with_a_lua_callback_finishes_before_lua_goes);
  RUN(a_tool_request_in_flight_completes_before_lua_goes);
  RUN(many_engines_freed_with_open_tool_timers_on_one_loop);
  unlink(tool_file);
  unlink(mark_file);
  rmdir(dir);
  return TEST_END();
}
