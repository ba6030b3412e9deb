/* test_run_delegate_confine.c -- _delegate stays inside the plans root when the call
 * runs, even for a plan nobody validated (defence in depth), and the public API's
 * plans_root: a plan file's folder by default, the current directory for text. */
#include <sys/stat.h>
#include <unistd.h>

#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "obelus.h"
#include "test.h"

static char dir[64];

static void write_file(const char *name, const char *text) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

/* Runs plan_json (named name) without validating it, under plans_root; returns its
 * log as JSON text (malloc'ed), its errors included. */
static char *run_unchecked(const char *plan_json, const char *name, const char *root) {
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  ob_value *pv = ob_json_parse(plan_json, strlen(plan_json), &err);
  CHECK(pv != NULL);
  ob_plan *p = ob_plan_from_value(pv, name);
  CHECK_INT(p->nerrors, 0);
  ob_run_options ro = {.plans_root = root};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK(ob_run_finished(r));
  ob_value *log = ob_array();
  for (size_t i = 0; i < ob_log_len(ob_run_log(r)); i++)
    log = ob_array_push(log, ob_log_message(ob_run_log(r), i));
  char *text = ob_json_print(log, 0, NULL);
  ob_unref(log);
  ob_run_free(r);
  ob_plan_free(p);
  ob_unref(pv);
  ob_engine_free(e);
  return text;
}

TEST(the_run_refuses_what_validation_would_have) {
  char name[160], plans[160];
  path_of(name, sizeof name, "plans/top.json");
  path_of(plans, sizeof plans, "plans");
  char *text = run_unchecked(
      "{\"plan\":["
      "{\"_id\":\"pw\",\"_delegate\":\"/etc/passwd\",\"_outputPath\":\"a\"},"
      "{\"_id\":\"up\",\"_delegate\":\"../outside.json\",\"_outputPath\":\"b\"},"
      "{\"_id\":\"in\",\"_delegate\":\"inside.json\",\"_outputPath\":\"c\"}]}",
      name, plans);
  CHECK(strstr(text, "_delegate \\\"/etc/passwd\\\" is outside the plans root") != NULL);
  CHECK(strstr(text, "root:x:0") == NULL);
  CHECK(strstr(text, "_delegate \\\"../outside.json\\\" is outside the plans root") != NULL);
  CHECK(strstr(text, "\"data\":{\"c\":\"inside\"}") != NULL); /* inside the root: it ran */
  free(text);
  /* without a root, the current directory is the root: /tmp/... is outside it */
  text = run_unchecked("[{\"_id\":\"in\",\"_delegate\":\"inside.json\",\"_outputPath\":\"c\"}]",
                       name, NULL);
  CHECK(strstr(text, "is outside the plans root") != NULL);
  free(text);
}

TEST(the_api_takes_plans_root) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  char top[160], name[160];
  path_of(top, sizeof top, "plans/up.json");
  path_of(name, sizeof name, "plans/text.json");
  obelus_run_options opt = {0};
  obelus_run *run;
  /* a file: its folder is the root, ".." leaves it */
  CHECK_INT(obelus_run_new_file(e, &run, top, &opt), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "_delegate \"../outside.json\" is outside the plans root") !=
        NULL);
  CHECK(strstr(obelus_engine_errmsg(e), "call up (delegate)") != NULL);
  opt.plans_root = dir;
  CHECK_INT(obelus_run_new_file(e, &run, top, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 0);
  char *out = obelus_run_output(run);
  CHECK_STR(out, "{\"o\":\"outside\"}");
  free(out);
  obelus_run_free(run);
  /* text named in the folder: relative to it, but the root is the current directory */
  const char *text = "[{\"_id\":\"t\",\"_delegate\":\"inside.json\",\"_outputPath\":\"o\"}]";
  opt.plans_root = NULL;
  opt.name = name;
  CHECK_INT(obelus_run_new(e, &run, text, &opt), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "is outside the plans root") != NULL);
  opt.plans_root = dir;
  CHECK_INT(obelus_run_new(e, &run, text, &opt), OBELUS_OK);
  obelus_run_free(run);
  /* a root that is not there */
  char nowhere[160];
  path_of(nowhere, sizeof nowhere, "nowhere");
  opt.plans_root = nowhere;
  CHECK_INT(obelus_run_new(e, &run, text, &opt), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "the plans root") != NULL);
  obelus_engine_free(e);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-confine-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  char *real = realpath(dir, NULL); /* messages name the root by its real path */
  snprintf(dir, sizeof dir, "%s", real);
  free(real);
  char plans[160];
  path_of(plans, sizeof plans, "plans");
  mkdir(plans, 0700);
  write_file("outside.json", "{\"plan\":[],\"output\":\"outside\"}");
  write_file("plans/inside.json", "{\"plan\":[],\"output\":\"inside\"}");
  write_file("plans/up.json",
             "[{\"_id\":\"up\",\"_delegate\":\"../outside.json\",\"_outputPath\":\"o\"}]");
  RUN(the_run_refuses_what_validation_would_have);
  RUN(the_api_takes_plans_root);
  const char *names[] = {"outside.json", "plans/inside.json", "plans/up.json", "plans"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[160];
    path_of(path, sizeof path, names[i]);
    if (unlink(path) != 0)
      rmdir(path);
  }
  rmdir(dir);
  return TEST_END();
}
