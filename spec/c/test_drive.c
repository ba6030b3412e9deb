/* test_drive.c -- the run driver (drive/ob_drive.h) as a host uses it, below every
 * front-end: a plan prepared (problems kept on the plan, a missing plans root refused),
 * its journal opened (an existing journal refused unless overwritten), the end record
 * written once by the driver when the last call settles, fire-and-forget calls included,
 * and again never; an engine's driver that does the host's deferred work on the next
 * turn of the loop, finds a run by its scheduler's run, and fails the calls nothing can
 * wake any more (by itself at the end of a turn, and when asked). */
#include <unistd.h>

#include "drive/ob_drive.h"
#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64];

static const char *path_of(const char *name) {
  static char path[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
  return path[k];
}

/* C tools: "now" completes at once; "later" after params.ms on a timer; "never" never. */
typedef struct later {
  uv_timer_t timer;
  ob_call_handle *h;
} later;

static void later_closed(uv_handle_t *t) { free(t); }

static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  ob_value *r = ob_int(7);
  ob_call_complete(l->h, 0, r, NULL);
  ob_unref(r);
  uv_close((uv_handle_t *)t, later_closed);
}

static void now(ob_call_handle *h, const ob_value *params, void *data) {
  (void)data;
  ob_call_complete(h, 0, ob_object_get(params, "x", 1), NULL);
}

static void after(ob_call_handle *h, const ob_value *params, void *data) {
  later *l = malloc(sizeof *l);
  l->h = h;
  uv_timer_init((uv_loop_t *)data, &l->timer);
  uv_timer_start(&l->timer, later_fire, (uint64_t)ob_int_value(ob_object_get(params, "ms", 2)), 0);
}

/* "once": like "later", but its timer stays open until the test closes it (a closing
 * handle keeps the loop alive through the end of its turn; a stopped one does not) */
static later *kept;

static void once_fire(uv_timer_t *t) {
  later *l = (later *)t;
  ob_value *r = ob_int(7);
  ob_call_complete(l->h, 0, r, NULL);
  ob_unref(r);
}

static void once(ob_call_handle *h, const ob_value *params, void *data) {
  later *l = kept = malloc(sizeof *l);
  l->h = h;
  uv_timer_init((uv_loop_t *)data, &l->timer);
  uv_timer_start(&l->timer, once_fire, (uint64_t)ob_int_value(ob_object_get(params, "ms", 2)), 0);
}

static void never(ob_call_handle *h, const ob_value *params, void *data) {
  (void)h, (void)params, (void)data;
}

static ob_engine *engine(void) {
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(e != NULL);
  CHECK_INT(ob_engine_add_tool(e, "now", NULL, now, NULL, &err), OB_OK);
  CHECK_INT(ob_engine_add_tool(e, "later", NULL, after, e->loop, &err), OB_OK);
  CHECK_INT(ob_engine_add_tool(e, "never", NULL, never, NULL, &err), OB_OK);
  CHECK_INT(ob_engine_add_tool(e, "once", NULL, once, e->loop, &err), OB_OK);
  return e;
}

static ob_drun *prepare(ob_engine *e, const char *json, const char *root, ob_error *err) {
  ob_drive_source src = {.name = "test.json",
                         .plan = ob_json_parse(json, strlen(json), err),
                         .plans_root = root ? root : dir,
                         .input_label = "input"};
  return ob_drun_prepare(e, &src, err);
}

/* How many lines of the file hold needle. */
static int lines_with(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f))
    n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

typedef struct heard {
  int events, done, ended_at_done; /* ended_at_done: the end record was there at on_done */
  ob_drun *d;
  const char *journal;
} heard;

static void on_event(void *ud, const ob_event *ev) {
  (void)ev;
  ((heard *)ud)->events++;
}

static void on_done(ob_run *r, void *ud) {
  heard *h = ud;
  (void)r;
  h->done++;
  ob_wal_flush(ob_drun_journal(h->d));
  h->ended_at_done = lines_with(h->journal, "\"end\"");
}

TEST(problems_stay_on_the_plan_and_a_missing_root_is_refused) {
  ob_engine *e = engine();
  ob_error err;
  ob_drun *d = prepare(e, "[{\"_tool\":\"nosuch\",\"_outputPath\":\"" DAGGER "state.a\"}]", NULL,
                       &err);
  CHECK(d != NULL);
  CHECK_INT(ob_drun_plan(d)->nerrors, 1);
  CHECK(strstr(ob_drun_plan(d)->errors[0], "nosuch") != NULL);
  CHECK(ob_drun_journal(d) == NULL); /* nothing opened */
  ob_drun_free(d);
  d = prepare(e, "[]", path_of("nowhere"), &err);
  CHECK(d == NULL);
  CHECK(strstr(err.msg, "nowhere") != NULL);
  ob_engine_free(e);
}

TEST(an_existing_journal_is_refused_unless_overwritten) {
  const char *journal = path_of("old.jsonl");
  FILE *f = fopen(journal, "w");
  fputs("{\"kind\":\"plan\"}\n", f);
  fclose(f);
  ob_engine *e = engine();
  ob_error err;
  ob_drun *d = prepare(e, "[]", NULL, &err);
  CHECK_INT(ob_drun_open_journal(d, journal, 0, OB_FSYNC_NEVER, &err), OB_EIO);
  CHECK(strstr(err.msg, "old.jsonl") != NULL);
  CHECK(ob_drun_journal(d) == NULL);
  CHECK_INT(lines_with(journal, "\"plan\""), 1); /* untouched */
  CHECK_INT(ob_drun_open_journal(d, journal, 1, OB_FSYNC_NEVER, &err), OB_OK);
  ob_drun_free(d);
  ob_engine_free(e);
}

TEST(the_end_record_is_written_once_when_the_last_call_settles) {
  const char *journal = path_of("run.jsonl");
  ob_engine *e = engine();
  ob_error err;
  /* "bg" has no output path: fire-and-forget, it outlasts the awaited call */
  ob_drun *d = prepare(e,
                       "[{\"_id\":\"a\",\"_tool\":\"now\",\"x\":1,\"_outputPath\":\"" DAGGER
                       "state.a\"},"
                       "{\"_id\":\"bg\",\"_tool\":\"later\",\"ms\":20}]",
                       NULL, &err);
  CHECK_INT(ob_drun_plan(d)->nerrors, 0);
  CHECK_INT(ob_drun_open_journal(d, journal, 1, OB_FSYNC_NEVER, &err), OB_OK);
  heard h = {.d = d, .journal = journal};
  ob_run_options ro = {.on_event = on_event, .on_done = on_done, .ud = &h};
  CHECK_INT(ob_drun_make(d, &ro, &err), OB_OK);
  CHECK(!ob_drun_threads(d) && ob_drun_run(d) != NULL);
  CHECK_INT(ob_drun_start(d, NULL, NULL, NULL, 0, &err), OB_OK);
  while (uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK_INT(h.done, 1);
  CHECK_INT(h.ended_at_done, 0); /* the awaited call settled, bg still ran: no end yet */
  CHECK(h.events > 0);           /* the host heard the events after the driver */
  CHECK(ob_drun_finished(d));
  CHECK_INT(ob_drun_detached(d), 0);
  CHECK_INT(ob_drun_exit_status(d), 0);
  ob_drun_end_journal(d); /* written already when bg settled: not again */
  CHECK_INT(ob_drun_close_journal(d, &err), OB_OK);
  CHECK_INT(lines_with(journal, "\"end\""), 1);
  ob_value *out = ob_drun_output(d);
  CHECK_INT(ob_int_value(ob_object_get(out, "a", 1)), 1);
  ob_unref(out);
  ob_drun_free(d);
  ob_engine_free(e);
}

static int flushes;
static void count_flush(void *ud) {
  (void)ud;
  flushes++;
}

TEST(the_engine_driver_defers_finds_and_fails_stalls) {
  ob_engine *e = engine();
  ob_drive *dv = ob_drive_new(e, &(ob_drive_host){.flush = count_flush}, 1);
  ob_error err;
  /* deferred twice, flushed once, on the next turn */
  ob_drive_defer(dv);
  ob_drive_defer(dv);
  CHECK_INT(flushes, 0);
  uv_run(e->loop, UV_RUN_NOWAIT);
  CHECK_INT(flushes, 1);
  uv_run(e->loop, UV_RUN_NOWAIT);
  CHECK_INT(flushes, 1);
  /* a call that waits for nothing: when asked, it fails as stalled */
  ob_drun *d = prepare(e, "[{\"_id\":\"s\",\"_tool\":\"never\",\"_outputPath\":\"" DAGGER
                          "state.s\"}]", NULL, &err);
  ob_run_options ro = {0};
  CHECK_INT(ob_drun_make(d, &ro, &err), OB_OK);
  int host_handle;
  ob_drun_attach(d, dv, &host_handle);
  CHECK(ob_drive_find(dv, ob_drun_run(d)) == &host_handle);
  CHECK(ob_drive_runs(dv) == d && ob_drun_next(d) == NULL && ob_drun_host(d) == &host_handle);
  ob_drun_start(d, NULL, NULL, NULL, 0, &err);
  CHECK(!ob_drun_finished(d));
  CHECK_INT(ob_drive_fail_stalled(dv), 1);
  CHECK(ob_drun_finished(d));
  CHECK_INT(ob_drun_exit_status(d), 1);
  ob_drun_free(d);
  CHECK(ob_drive_runs(dv) == NULL); /* freed: off the list */
  /* by itself: the end of the turn in which the last timer fired finds the stall */
  d = prepare(e, "[{\"_id\":\"t\",\"_tool\":\"once\",\"ms\":1,\"_outputPath\":\"" DAGGER
                 "state.t\"},"
                 "{\"_id\":\"s\",\"_tool\":\"never\",\"x\":\"" DAGGER "state.t\",\"_outputPath\":\""
                 DAGGER "state.s\"}]", NULL, &err);
  CHECK_INT(ob_drun_make(d, &ro, &err), OB_OK);
  ob_drun_attach(d, dv, &host_handle);
  ob_drun_start(d, NULL, NULL, NULL, 0, &err);
  /* UV_RUN_DEFAULT: the timer fires at the start of a turn, and that turn's check finds
   * the loop empty (UV_RUN_ONCE runs due timers once more after the check, and returns) */
  uv_run(e->loop, UV_RUN_DEFAULT);
  CHECK(ob_drun_finished(d));
  CHECK_INT(ob_drun_exit_status(d), 1);
  ob_value *out = ob_drun_output(d);
  CHECK_INT(ob_int_value(ob_object_get(out, "t", 1)), 7); /* t done, s stalled */
  ob_unref(out);
  ob_drun_free(d);
  uv_close((uv_handle_t *)&kept->timer, later_closed);
  ob_drive_free(dv);
  ob_engine_free(e);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-drive-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  RUN(problems_stay_on_the_plan_and_a_missing_root_is_refused);
  RUN(an_existing_journal_is_refused_unless_overwritten);
  RUN(the_end_record_is_written_once_when_the_last_call_settles);
  RUN(the_engine_driver_defers_finds_and_fails_stalls);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    return 1;
  return TEST_END();
}
