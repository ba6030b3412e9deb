/* test_api_resume.c -- obelus_resume through the public API (obelus.h only): a run with a
 * journal killed mid-run (a child process SIGKILLs itself inside a C tool, as a crash
 * would), then taken up in this process: the same status and output as an uninterrupted
 * run, and the calls that had completed are not run again (C tools count their calls, a
 * Lua tool appends to a marker file). A journal of a run that ended runs nothing; one of
 * a cancelled run goes on; a changed tool file is refused unless forced; bad arguments,
 * files that are not journals, and `obelus loop` journals are refused. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64], tools_file[128], marker[128], journal[128];

static const char *path_of(const char *name) {
  static char path[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  return path[k];
}

static void write_tools(const char *extra) {
  FILE *f = fopen(tools_file, "w");
  fprintf(f,
          "local obelus = require 'obelus'\n"
          "return {\n"
          "  { name = 'slow', run = function(c)\n"
          "      local f = assert(io.open('%s', 'a')); f:write(c.tag, '\\n'); f:close()\n"
          "      obelus.sleep(c.ms)\n"
          "      return c.x * 10\n"
          "    end },\n"
          "}\n%s",
          marker, extra);
  fclose(f);
}

/* Lines in the marker file: how many times the Lua tool ran. */
static int marker_lines(void) {
  FILE *f = fopen(marker, "r");
  if (!f)
    return 0;
  int n = 0, ch;
  while ((ch = fgetc(f)) != EOF)
    n += ch == '\n';
  fclose(f);
  return n;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The journal's last line (without its newline). */
static const char *last_line(const char *path) {
  static char line[4096], last[4096];
  last[0] = 0;
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    snprintf(last, sizeof last, "%s", line);
  }
  if (f)
    fclose(f);
  return last;
}

static int journal_has(const char *path, const char *text) {
  static char line[4096];
  int n = 0;
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f))
    n += strstr(line, text) != NULL;
  if (f)
    fclose(f);
  return n;
}

/* --- C tools: they count their calls by id (in this process) --- */

static char ran_id[32][16];
static int ran_count[32], nran;
static int crash_armed; /* in the child: the fragile tool kills the process */

static void count(const char *id) {
  for (int i = 0; i < nran; i++)
    if (!strcmp(ran_id[i], id)) {
      ran_count[i]++;
      return;
    }
  snprintf(ran_id[nran], sizeof ran_id[nran], "%s", id);
  ran_count[nran++] = 1;
}

static int ran(const char *id) {
  for (int i = 0; i < nran; i++)
    if (!strcmp(ran_id[i], id))
      return ran_count[i];
  return 0;
}

static void reset_counts(void) { nran = 0; }

static long json_int(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtol(p + strlen(pat), NULL, 10) : -999;
}

static void tick(obelus_call *call, const char *params, void *data) {
  (void)data;
  count(obelus_call_id(call));
  char out[32];
  snprintf(out, sizeof out, "%ld", json_int(params, "x") + 1);
  obelus_call_complete(call, out);
}

static void fragile(obelus_call *call, const char *params, void *data) {
  (void)data;
  if (crash_armed)
    raise(SIGKILL); /* the process dies while the call runs: its start is in the journal */
  count(obelus_call_id(call));
  char out[32];
  snprintf(out, sizeof out, "%ld", json_int(params, "x") + 100);
  obelus_call_complete(call, out);
}

static void boom(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  count(obelus_call_id(call));
  obelus_call_fail(call, "boom");
}

static obelus_engine *engine(void) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tools_file), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "tick", NULL, tick, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "fragile", NULL, fragile, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "boom", NULL, boom, NULL), OBELUS_OK);
  return e;
}

/* a -> b (Lua, sleeps) -> c (the crash) -> d; e on its own */
#define PLAN_WITH(ms)                                                                        \
  "{\"context\":[{\"type\":\"input\",\"data\":{\"n\":1}}],"                                 \
  " \"plan\":["                                                                              \
  "  {\"_id\":\"a\",\"_tool\":\"tick\",\"x\":\"" DAGGER "input.n\",\"_outputPath\":\"" DAGGER \
  "state.a\"},"                                                                              \
  "  {\"_id\":\"b\",\"_tool\":\"slow\",\"tag\":\"b\",\"ms\":" ms ",\"x\":\"" DAGGER          \
  "state.a\",\"_outputPath\":\"" DAGGER "state.b\"},"                                        \
  "  {\"_id\":\"c\",\"_tool\":\"fragile\",\"x\":\"" DAGGER "state.b\",\"_outputPath\":\""    \
  DAGGER "state.c\"},"                                                                       \
  "  {\"_id\":\"d\",\"_tool\":\"tick\",\"x\":\"" DAGGER "state.c\",\"_outputPath\":\"" DAGGER \
  "state.d\"},"                                                                              \
  "  {\"_id\":\"e\",\"_tool\":\"tick\",\"x\":41,\"_outputPath\":\"" DAGGER "state.e\"}"       \
  " ],"                                                                                      \
  " \"output\":{\"a\":\"" DAGGER "state.a\",\"b\":\"" DAGGER "state.b\",\"c\":\"" DAGGER      \
  "state.c\",\"d\":\"" DAGGER "state.d\",\"e\":\"" DAGGER "state.e\"}}"

static const char *PLAN = PLAN_WITH("5");
static const char *PLAN_SLOW = PLAN_WITH("400"); /* b sleeps long enough to be cancelled */
static const char *EXPECTED = "{\"a\":2,\"b\":20,\"c\":120,\"d\":121,\"e\":42}";

static const char *FAILING =
    "[{\"_id\":\"a\",\"_tool\":\"tick\",\"x\":1,\"_outputPath\":\"" DAGGER "state.a\"},"
    " {\"_id\":\"z\",\"_tool\":\"boom\",\"_outputPath\":\"" DAGGER "state.z\"}]";

typedef struct host {
  int done, status;
  char output[512];
} host;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)run;
  h->done++;
  h->status = status;
  snprintf(h->output, sizeof h->output, "%s", output);
}

static obelus_run_options options(host *h) {
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = h;
  return opt;
}

/* Runs plan to its end in this process, journaled to path when given. */
static int run_plan(const char *plan, const char *path, host *h) {
  obelus_engine *e = engine();
  obelus_run_options opt = options(h);
  FILE *j = path ? fopen(path, "w") : NULL;
  opt.journal = j;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  int status = obelus_run_wait(run);
  obelus_run_free(run);
  if (j)
    fclose(j);
  obelus_engine_free(e);
  return status;
}

/* A journal of PLAN as a crash leaves it: a child runs it and is killed inside c. */
static void crashed_journal(const char *path) {
  unlink(marker);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    crash_armed = 1;
    host h = {0};
    run_plan(PLAN, path, &h);
    _exit(3); /* not reached: fragile kills the process */
  }
  int ws = 0;
  waitpid(pid, &ws, 0);
  CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  CHECK_INT(marker_lines(), 1); /* b ran in the child */
  CHECK_INT(journal_has(path, "{\"journal\":\"settled\",\"id\":\"b\""), 1);
  CHECK_INT(journal_has(path, "{\"journal\":\"start\",\"id\":\"c\""), 1);
  CHECK_INT(journal_has(path, "{\"journal\":\"end\""), 0);
}

/* Resumes the journal at path on a new engine, runs it to its end. */
static int resume(const char *path, host *h, int force) {
  obelus_engine *e = engine();
  obelus_run_options opt = options(h);
  opt.force = force;
  obelus_run *run;
  int rc = obelus_resume(e, &run, path, &opt);
  if (rc == OBELUS_OK) {
    CHECK_INT(obelus_run_start(run), OBELUS_OK);
    rc = obelus_run_wait(run);
    obelus_run_free(run);
  }
  obelus_engine_free(e);
  return rc;
}

TEST(a_killed_run_resumed_ends_as_the_uninterrupted_one_did) {
  host whole = {0};
  CHECK_INT(run_plan(PLAN, NULL, &whole), 0);
  CHECK_STR(whole.output, EXPECTED);

  crashed_journal(journal);
  reset_counts();
  host h = {0};
  CHECK_INT(resume(journal, &h, 0), 0);
  CHECK_INT(h.done, 1);
  CHECK_INT(h.status, whole.status);
  CHECK_STR(h.output, whole.output);
  CHECK_INT(ran("a"), 0); /* settled in the journal: not run again */
  CHECK_INT(ran("e"), 0);
  CHECK_INT(marker_lines(), 1); /* nor was b */
  CHECK_INT(ran("c"), 1); /* in flight when killed: runs again */
  CHECK_INT(ran("d"), 1);
  CHECK_INT(journal_has(journal, "{\"journal\":\"resume\"}"), 1);
  CHECK_STR(last_line(journal), "{\"journal\":\"end\",\"exit\":0}");
}

TEST(a_journal_of_a_run_that_ended_runs_nothing_and_writes_nothing) {
  host whole = {0};
  unlink(marker);
  CHECK_INT(run_plan(PLAN, journal, &whole), 0);
  CHECK_STR(last_line(journal), "{\"journal\":\"end\",\"exit\":0}");
  long size = file_size(journal);
  reset_counts();
  host h = {0};
  CHECK_INT(resume(journal, &h, 0), 0);
  CHECK_INT(h.done, 1);
  CHECK_INT(h.status, 0);
  CHECK_STR(h.output, EXPECTED);
  CHECK_INT(nran, 0);
  CHECK_INT(marker_lines(), 1);
  CHECK_INT(file_size(journal), size);

  /* and the status it ended with, 1 for a call that failed */
  CHECK_INT(run_plan(FAILING, journal, &whole), 1);
  CHECK_STR(last_line(journal), "{\"journal\":\"end\",\"exit\":1}");
  reset_counts();
  memset(&h, 0, sizeof h);
  CHECK_INT(resume(journal, &h, 0), 1);
  CHECK_INT(h.status, 1);
  CHECK_STR(h.output, whole.output);
  CHECK_INT(nran, 0);
}

/* Cancels the run a few ms in (b is asleep): the journal has no end record. */
static void cancel_soon(uv_timer_t *t) {
  obelus_run_cancel(t->data);
  uv_close((uv_handle_t *)t, NULL);
}

/* A journal that cannot be written (issue 26): the run stops, no tool runs without
 * its start record in the file, and obelus_run_wait says OBELUS_EIO. */
TEST(a_journal_that_cannot_be_written_stops_the_run) {
  unlink(marker);
  obelus_engine *e = engine();
  host h = {0};
  obelus_run_options opt = options(&h);
  FILE *j = fopen("/dev/full", "w");
  CHECK(j != NULL);
  opt.journal = j;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, PLAN, &opt), OBELUS_OK);
  reset_counts();
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), OBELUS_EIO);
  obelus_run_free(run);
  fclose(j);
  obelus_engine_free(e);
  CHECK_INT(ran("a"), 0); /* not even the first call */
  CHECK_INT(ran("e"), 0);
  CHECK_INT(marker_lines(), 0);
}

TEST(a_cancelled_run_is_taken_up_where_it_stopped) {
  unlink(marker);
  obelus_engine *e = engine();
  host h = {0};
  obelus_run_options opt = options(&h);
  FILE *j = fopen(journal, "w");
  opt.journal = j;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, PLAN_SLOW, &opt), OBELUS_OK);
  uv_timer_t t;
  uv_timer_init(obelus_engine_loop(e), &t);
  t.data = run;
  uv_timer_start(&t, cancel_soon, 20, 0);
  reset_counts();
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), OBELUS_ECANCELED);
  CHECK_INT(h.done, 0);
  obelus_run_free(run);
  fclose(j);
  obelus_engine_free(e);
  CHECK_INT(ran("a"), 1);
  CHECK_INT(journal_has(journal, "{\"journal\":\"end\""), 0);

  reset_counts();
  memset(&h, 0, sizeof h);
  CHECK_INT(resume(journal, &h, 0), 0);
  CHECK_STR(h.output, EXPECTED);
  CHECK_INT(ran("a"), 0);
  CHECK_INT(ran("e"), 0);
  CHECK_INT(marker_lines(), 2); /* b had started: it runs again */
  CHECK_STR(last_line(journal), "{\"journal\":\"end\",\"exit\":0}");
}

TEST(a_changed_tool_file_is_refused_unless_forced) {
  crashed_journal(journal);
  long size = file_size(journal);
  write_tools("-- changed since the run\n");
  reset_counts();
  obelus_engine *e = engine();
  host h = {0};
  obelus_run_options opt = options(&h);
  obelus_run *run = (obelus_run *)&h;
  CHECK_INT(obelus_resume(e, &run, journal, &opt), OBELUS_EINVAL);
  CHECK(run == NULL);
  const char *msg = obelus_engine_errmsg(e);
  CHECK(strstr(msg, journal) != NULL);
  CHECK(strstr(msg, tools_file + strlen(dir)) != NULL); /* names the file */
  CHECK(strstr(msg, "changed since the run") != NULL);
  CHECK(strstr(msg, "force") != NULL);
  obelus_engine_free(e);
  CHECK_INT(nran, 0);
  CHECK_INT(file_size(journal), size); /* untouched */

  CHECK_INT(resume(journal, &h, 1), 0);
  CHECK_STR(h.output, EXPECTED);
  CHECK_INT(ran("a"), 0);
  CHECK_INT(ran("c"), 1);
  CHECK_INT(marker_lines(), 1);
  write_tools("");
}

TEST(what_is_refused) {
  obelus_engine *e = engine();
  obelus_run *run;
  obelus_run_options opt = {0};
  CHECK_INT(obelus_resume(e, NULL, journal, NULL), OBELUS_EINVAL);
  CHECK_INT(obelus_resume(e, &run, NULL, NULL), OBELUS_EINVAL);
  opt.input = "{}";
  CHECK_INT(obelus_resume(e, &run, journal, &opt), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "input") != NULL);
  opt.input = NULL;
  opt.fsync = "sometimes";
  CHECK_INT(obelus_resume(e, &run, journal, &opt), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "sometimes") != NULL);
  CHECK_INT(obelus_resume(e, &run, path_of("nothing.jsonl"), NULL), OBELUS_EIO);
  CHECK(strstr(obelus_engine_errmsg(e), "nothing.jsonl") != NULL);

  FILE *f = fopen(path_of("not.jsonl"), "w");
  fputs("{\"type\":\"data\",\"kind\":\"state\",\"data\":{}}\n", f);
  fclose(f);
  CHECK_INT(obelus_resume(e, &run, path_of("not.jsonl"), NULL), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "not a journal") != NULL);

  f = fopen(path_of("loop.jsonl"), "w");
  fputs("{\"type\":\"plan\",\"plan\":[],\"file\":\"p.json\"}\n"
        "{\"journal\":\"run\",\"tools\":[],\"loop\":{\"planner\":{\"file\":\"planner.lua\"},"
        "\"max_steps\":3}}\n",
        f);
  fclose(f);
  CHECK_INT(obelus_resume(e, &run, path_of("loop.jsonl"), NULL), OBELUS_EINVAL);
  CHECK(run == NULL);
  CHECK(strstr(obelus_engine_errmsg(e), "obelus resume") != NULL);

  /* a plan that no longer checks against the engine: its problems, nothing ran */
  host h = {0};
  CHECK_INT(run_plan(FAILING, journal, &h), 1);
  obelus_engine *bare;
  CHECK_INT(obelus_engine_new(&bare, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(bare, tools_file), OBELUS_OK);
  CHECK_INT(obelus_resume(bare, &run, journal, NULL), OBELUS_EINVAL);
  CHECK(obelus_engine_nproblems(bare) >= 2); /* tick and boom are unknown */
  obelus_engine_free(bare);
  obelus_engine_free(e);
  unlink(path_of("not.jsonl"));
  unlink(path_of("loop.jsonl"));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-resume-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(tools_file, sizeof tools_file, "%s/tools.lua", dir);
  snprintf(marker, sizeof marker, "%s/marker", dir);
  snprintf(journal, sizeof journal, "%s/run.jsonl", dir);
  write_tools("");
  RUN(a_killed_run_resumed_ends_as_the_uninterrupted_one_did);
  RUN(a_journal_of_a_run_that_ended_runs_nothing_and_writes_nothing);
  RUN(a_journal_that_cannot_be_written_stops_the_run);
  RUN(a_cancelled_run_is_taken_up_where_it_stopped);
  RUN(a_changed_tool_file_is_refused_unless_forced);
  RUN(what_is_refused);
  unlink(tools_file);
  unlink(marker);
  unlink(journal);
  rmdir(dir);
  return TEST_END();
}
