/* test_api_loop.c -- what a host sees of the loop through the public API: calls that wait
 * on nothing fail as stalled (obelus_run_wait, or obelus_run_fail_stalled when the host
 * runs the loop), fire-and-forget calls outlive the completion, the journal, and a latent
 * handler set by a script (obelus_engine_load_script). */
#include <sys/stat.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64];

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static const char *path_of(const char *name) {
  static char path[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  return path[k];
}

typedef struct host {
  int done, status;
  size_t detached_at_done;
  char output[256];
} host;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  h->done++;
  h->status = status;
  h->detached_at_done = obelus_run_detached(run);
  snprintf(h->output, sizeof h->output, "%s", output);
}

static obelus_run *start(obelus_engine *e, const char *plan, host *h, FILE *journal) {
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = h;
  opt.journal = journal;
  obelus_run *run = NULL;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  return run;
}

static const char *STALLING = /* a Lua call that waits for a resume nobody will call */
    "[{\"_id\":\"stuck\",\"_tool\":\"forever\",\"_outputPath\":\"" DAGGER "state.s\"},"
    " {\"_id\":\"ok\",\"_tool\":\"quick\",\"_outputPath\":\"" DAGGER "state.ok\"}]";

TEST(wait_fails_the_calls_that_wait_on_nothing) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path_of("tools")), OBELUS_OK);
  host h = {0};
  obelus_run *run = start(e, STALLING, &h, NULL);
  CHECK_INT(obelus_run_wait(run), 1); /* a stall is a runtime error of the call */
  CHECK_STR(h.output, "{\"ok\":true}");
  char *why = NULL;
  CHECK_INT(obelus_run_resolve(run, DAGGER "error.error", NULL, OBELUS_NOW, &why), OBELUS_OK);
  CHECK(why && !strncmp(why, "\"stalled: ", 10));
  free(why);
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(a_host_running_its_loop_fails_stalled_calls_itself) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, &loop), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path_of("tools")), OBELUS_OK);
  host h = {0};
  obelus_run *run = start(e, STALLING, &h, NULL);
  uv_run(&loop, UV_RUN_DEFAULT); /* returns: nothing left to do, yet `stuck` waits */
  CHECK_INT(h.done, 0);
  CHECK_INT(obelus_run_status(run), OBELUS_EBUSY);
  CHECK_INT(obelus_run_fail_stalled(run), 1);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(h.done, 1);
  CHECK_INT(obelus_run_fail_stalled(run), 0);
  obelus_run_free(run);
  obelus_engine_free(e);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(fire_and_forget_calls_outlive_the_completion) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path_of("tools")), OBELUS_OK);
  host h = {0};
  char jpath[128];
  snprintf(jpath, sizeof jpath, "%s", path_of("journal.jsonl"));
  FILE *j = fopen(jpath, "w");
  obelus_run *run = start(e,
                          "[{\"_id\":\"bg\",\"_tool\":\"nap\",\"ms\":30},"
                          " {\"_id\":\"fg\",\"_tool\":\"nap\",\"ms\":1,\"_outputPath\":\"fg\"}]",
                          &h, j);
  CHECK_INT(obelus_run_wait(run), 0);
  CHECK_INT(h.detached_at_done, 1); /* bg still naps */
  CHECK_STR(h.output, "{\"fg\":1}");
  while (obelus_run_detached(run))
    uv_run(obelus_engine_loop(e), UV_RUN_ONCE);
  obelus_run_free(run);
  fclose(j);
  /* the journal: the plan first, then every message as it came */
  j = fopen(jpath, "r");
  char line[1024];
  int lines = 0, plan_first = 0;
  while (fgets(line, sizeof line, j)) {
    if (!strncmp(line, "{\"journal\":", 11))
      continue; /* a record (run, start, settled), not a message */
    if (lines++ == 0)
      plan_first = !strncmp(line, "{\"type\":\"plan\"", 14);
  }
  fclose(j);
  unlink(jpath);
  CHECK(plan_first);
  CHECK_INT(lines, 2); /* the plan, fg's output (bg writes nothing) */
  obelus_engine_free(e);
}

TEST(a_script_sets_the_latent_handler) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path_of("tools")), OBELUS_OK);
  obelus_run *run;
  const char *plan = "[{\"_tool\":\"ponder\",\"q\":\"why\",\"_outputPath\":\"answer\"}]";
  CHECK_INT(obelus_run_new(e, &run, plan, NULL), OBELUS_EINVAL); /* no handler yet */
  CHECK(strstr(obelus_engine_errmsg(e), "ponder") != NULL);
  CHECK_INT(obelus_engine_load_script(e, path_of("latent.lua")), OBELUS_OK);
  host h = {0};
  run = start(e, plan, &h, NULL);
  CHECK_INT(obelus_run_wait(run), 0);
  CHECK_STR(h.output, "{\"answer\":\"ponder says: why\"}");
  obelus_run_free(run);
  obelus_engine_free(e);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-loop-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  mkdir(path_of("tools"), 0700);
  write_file("tools/tools.lua",
             "local obelus = require 'obelus'\n"
             "return {\n"
             "  { name = 'forever', run = function() obelus.await(function(resume) end) end },\n"
             "  { name = 'quick', run = function() return true end },\n"
             "  { name = 'nap', run = function(c) obelus.sleep(c.ms); return c.ms end },\n"
             "  { name = 'ponder', schema = { required = { 'q' } } },\n"
             "}\n");
  write_file("latent.lua", "local obelus = require 'obelus'\n"
                           "obelus.set_latent(function(call, tool)\n"
                           "  obelus.sleep(1); return tool.name .. ' says: ' .. call.q end)\n");
  RUN(wait_fails_the_calls_that_wait_on_nothing);
  RUN(a_host_running_its_loop_fails_stalled_calls_itself);
  RUN(fire_and_forget_calls_outlive_the_completion);
  RUN(a_script_sets_the_latent_handler);
  unlink(path_of("tools/tools.lua"));
  unlink(path_of("latent.lua"));
  rmdir(path_of("tools"));
  rmdir(dir);
  return TEST_END();
}
