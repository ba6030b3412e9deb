/* test_api_fork.c -- obelus_fork through the public API (obelus.h only): a run with a
 * journal, then a fork of it from a call with a value changed: the fork's output has
 * the change, only the changed path's readers and the call's dependants ran again (a
 * Lua tool appends its tag to a marker file), the source journal is untouched, and the
 * fork's journal names its source first. Bad points and options are refused. */
#include <sys/stat.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64], tools_file[128], marker[128], journal[128], forked[128];

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  s[fread(s, 1, (size_t)n, f)] = 0;
  fclose(f);
  return s;
}

static const char PLAN[] =
    "{\"plan\":["
    "{\"_id\":\"a\",\"_tool\":\"mark\",\"tag\":\"a\",\"x\":1,\"_outputPath\":\"" DAGGER "state.a\"},"
    "{\"_id\":\"b\",\"_tool\":\"mark\",\"tag\":\"b\",\"x\":\"" DAGGER "state.a\",\"_outputPath\":\"" DAGGER "state.b\"},"
    "{\"_id\":\"z\",\"_tool\":\"mark\",\"tag\":\"z\",\"x\":7,\"_outputPath\":\"" DAGGER "state.z\"}],"
    "\"output\":{\"b\":\"" DAGGER "state.b\",\"z\":\"" DAGGER "state.z\"}}";

static char *run_to_end(obelus_engine *e, obelus_run *run) {
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 0);
  char *out = obelus_run_output(run);
  obelus_run_free(run);
  (void)e;
  return out;
}

TEST(a_fork_runs_the_changed_path_readers_only) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tools_file), OBELUS_OK);
  FILE *j = fopen(journal, "w");
  obelus_run_options opt = {.journal = j};
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, PLAN, &opt), OBELUS_OK);
  char *out = run_to_end(e, run);
  fclose(j);
  CHECK_STR(out, "{\"b\":3,\"z\":8}");
  free(out);
  char *before = slurp(journal);
  unlink(marker);
  const char *sets[] = {DAGGER "state.a=40"};
  obelus_fork_options fo = {.journal = forked, .from = "b", .sets = sets, .nsets = 1};
  CHECK_INT(obelus_fork(e, &run, journal, &fo, NULL), OBELUS_OK);
  out = run_to_end(e, run);
  CHECK_STR(out, "{\"b\":41,\"z\":8}");
  free(out);
  char *marks = slurp(marker);
  CHECK_STR(marks, "b\n"); /* a and z kept their results */
  free(marks);
  char *after = slurp(journal);
  CHECK_STR(after, before); /* the source is never written */
  char *f = slurp(forked);
  CHECK(f && strstr(f, "{\"journal\":\"fork\",\"source\":\"") != NULL);
  CHECK(f && strstr(f, "\"_call\":{\"_tool\":\"fork\"}") != NULL);
  free(f);
  free(before);
  free(after);
  obelus_engine_free(e);
}

TEST(bad_forks_are_refused) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tools_file), OBELUS_OK);
  obelus_run *run = (obelus_run *)1;
  obelus_fork_options fo = {.journal = forked, .from = "nope", .overwrite = 1};
  CHECK_INT(obelus_fork(e, &run, journal, &fo, NULL), OBELUS_EINVAL);
  CHECK(run == NULL);
  CHECK(strstr(obelus_engine_errmsg(e), "--from nope") != NULL);
  const char *bad[] = {"no reference"};
  obelus_fork_options fo2 = {.journal = forked, .from = "b", .sets = bad, .nsets = 1,
                             .overwrite = 1};
  CHECK_INT(obelus_fork(e, &run, journal, &fo2, NULL), OBELUS_EINVAL);
  obelus_fork_options fo3 = {.journal = NULL, .from = "b"};
  CHECK_INT(obelus_fork(e, &run, journal, &fo3, NULL), OBELUS_EINVAL);
  obelus_engine_free(e);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus_fork_XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(tools_file, sizeof tools_file, "%s/tools.lua", dir);
  snprintf(marker, sizeof marker, "%s/marks", dir);
  snprintf(journal, sizeof journal, "%s/run.jsonl", dir);
  snprintf(forked, sizeof forked, "%s/fork.jsonl", dir);
  FILE *t = fopen(tools_file, "w");
  fprintf(t,
          "return {\n"
          "  { name = 'mark', run = function(c)\n"
          "      local f = assert(io.open('%s', 'a')); f:write(c.tag, '\\n'); f:close()\n"
          "      return c.x + 1\n"
          "    end },\n"
          "}\n",
          marker);
  fclose(t);
  RUN(a_fork_runs_the_changed_path_readers_only);
  RUN(bad_forks_are_refused);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    return 1;
  return TEST_END();
}
