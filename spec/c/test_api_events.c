/* test_api_events.c -- a host subscribed to a run's events gets every one, in the order
 * the scheduler made them (ready, started, done, skipped, failed, run_done), from the loop,
 * before the completion; each event's position reads the run as it was then. A note
 * (OBELUS_EVENT_NOTE) carries what the engine says about a call: a retry, a traceback. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

/* Chooses the second alternative of its _outputPath: a rainy day. */
static void pick(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  obelus_call_branch(call, 1, "{\"sky\":\"rain\"}");
}

static void echo(obelus_call *call, const char *params, void *data) {
  (void)data;
  const char *x = strstr(params, "\"x\":");
  char out[128];
  snprintf(out, sizeof out, "%.*s", (int)strcspn(x + 4, ",}"), x + 4);
  obelus_call_complete(call, out);
}

static void boom(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  obelus_call_fail(call, "boom");
}

typedef struct host {
  obelus_engine *e;
  char seq[2048];
  size_t last_position;
  double last_t;
  int in_order, done, run_done_seen, done_after_run_done;
  char read_movie_at_done[64], skip_reason[256], fail_reason[64];
} host;

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  host *h = data;
  size_t n = strlen(h->seq);
  snprintf(h->seq + n, sizeof h->seq - n, "%s%s%s%s", n ? ", " : "", obelus_event_name(ev->type),
           ev->call_id ? " " : "", ev->call_id ? ev->call_id : "");
  if (ev->position < h->last_position || ev->t_ms < h->last_t)
    h->in_order = 0;
  h->last_position = ev->position;
  h->last_t = ev->t_ms;
  if (ev->type == OBELUS_EVENT_RUN_DONE) {
    h->run_done_seen = 1;
    CHECK(ev->call_id == NULL && ev->tool == NULL && ev->call_index == (size_t)-1);
  } else {
    CHECK(ev->tool != NULL);
  }
  if (ev->type == OBELUS_EVENT_SKIPPED && !strcmp(ev->call_id, "after"))
    snprintf(h->skip_reason, sizeof h->skip_reason, "%s", ev->reason);
  if (ev->type == OBELUS_EVENT_FAILED)
    snprintf(h->fail_reason, sizeof h->fail_reason, "%s", ev->reason);
  /* time travel: the run read exactly as it was when movie was done */
  if (ev->type == OBELUS_EVENT_DONE && !strcmp(ev->call_id, "movie")) {
    CHECK_INT(ev->call_index, 2);
    CHECK_STR(ev->tool, "echo");
    char *v;
    CHECK_INT(obelus_run_resolve(run, DAGGER "state.movie", NULL, ev->position, &v), OBELUS_OK);
    snprintf(h->read_movie_at_done, sizeof h->read_movie_at_done, "%s", v ? v : "");
    free(v);
    CHECK_INT(obelus_run_resolve(run, DAGGER "state.movie", NULL, ev->position - 1, &v),
              OBELUS_ENOENT);
  }
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)run, (void)output;
  h->done++;
  h->done_after_run_done = h->run_done_seen;
  CHECK_INT(status, 1); /* boom failed, no || handled it */
}

static const char *PLAN =
    "["
    "{\"_id\":\"w\",\"_tool\":\"pick\",\"_outputPath\":\"" DAGGER "state.sunny || " DAGGER "state.rainy\"},"
    "{\"_id\":\"park\",\"_tool\":\"echo\",\"x\":\"" DAGGER "state.sunny.sky\",\"_outputPath\":\"" DAGGER "state.park\"},"
    "{\"_id\":\"movie\",\"_tool\":\"echo\",\"x\":\"" DAGGER "state.rainy.sky\",\"_outputPath\":\"" DAGGER "state.movie\"},"
    "{\"_id\":\"boom\",\"_tool\":\"boom\",\"_outputPath\":\"" DAGGER "state.boom\"},"
    "{\"_id\":\"after\",\"_tool\":\"echo\",\"x\":\"" DAGGER "state.boom\",\"_outputPath\":\"" DAGGER "state.after\"}"
    "]";

TEST(events_arrive_in_order_from_the_loop_then_the_completion) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  host h = {.in_order = 1};
  CHECK_INT(obelus_engine_new(&h.e, &loop), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(h.e, "pick", NULL, pick, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(h.e, "echo", NULL, echo, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(h.e, "boom", NULL, boom, NULL), OBELUS_OK);
  obelus_run_options opt = {0};
  opt.on_event = on_event;
  opt.on_done = on_done;
  opt.data = &h;
  opt.time_travel = 1;
  obelus_run *run;
  CHECK_INT(obelus_run_new(h.e, &run, PLAN, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  /* every C tool completed inside start: the run is over, but nothing was
   * delivered yet (callbacks come from the loop) */
  CHECK_INT(obelus_run_status(run), 1);
  CHECK_STR(h.seq, "");
  uv_run(&loop, UV_RUN_DEFAULT); /* returns once everything is delivered */
  CHECK_STR(h.seq, "ready w, ready boom, started w, done w, ready park, ready movie, "
                   "started boom, failed boom, ready after, skipped park, started movie, "
                   "done movie, skipped after, run_done"); /* a skipped call never starts */
  CHECK(h.in_order);
  CHECK_INT(h.done, 1);
  CHECK(h.done_after_run_done);
  CHECK_STR(h.read_movie_at_done, "\"rain\"");
  CHECK_STR(h.fail_reason, "boom");
  CHECK(strstr(h.skip_reason, "upstream failed: call boom (boom)") != NULL);
  obelus_run_free(run);
  obelus_engine_free(h.e);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

static int lua_events;

static void count_event(obelus_run *run, const obelus_event *ev, void *data) {
  (void)run, (void)data;
  if (ev->type == OBELUS_EVENT_DONE && !strcmp(ev->tool, "sleepy"))
    lua_events++;
}

/* Events of Lua tools finishing on timers arrive as the loop turns. */
TEST(events_of_lua_tools_arrive_as_the_loop_turns) {
  char dir[] = "/tmp/obelus-api-events-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[96];
  snprintf(path, sizeof path, "%s/sleepy.lua", dir);
  FILE *f = fopen(path, "w");
  fputs("local obelus = require 'obelus'\n"
        "return { name = 'sleepy', run = function(c) obelus.sleep(c.ms); return c.ms end }\n",
        f);
  fclose(f);
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path), OBELUS_OK);
  obelus_run_options opt = {0};
  opt.on_event = count_event;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run,
                           "[{\"_tool\":\"sleepy\",\"ms\":1,\"_outputPath\":\"a\"},"
                           " {\"_tool\":\"sleepy\",\"ms\":20,\"_outputPath\":\"b\"}]",
                           &opt),
            OBELUS_OK);
  lua_events = 0;
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 0);
  CHECK_INT(lua_events, 2);
  obelus_run_free(run);
  obelus_engine_free(e);
  unlink(path);
  rmdir(dir);
}

static char notes[1024];

static void note_event(obelus_run *run, const obelus_event *ev, void *data) {
  (void)run, (void)data;
  if (ev->type != OBELUS_EVENT_NOTE) {
    CHECK(ev->note == NULL);
    return;
  }
  CHECK_STR(obelus_event_name(ev->type), "note");
  CHECK(ev->note != NULL && ev->reason != NULL);
  CHECK_STR(ev->call_id ? ev->call_id : "", "a");
  size_t n = strlen(notes);
  snprintf(notes + n, sizeof notes - n, "%s: %.*s|", ev->note,
           (int)strcspn(ev->reason, "\n"), ev->reason);
}

/* A Lua tool that fails twice under _retry: a note "retry" for the first attempt, a
 * note "traceback" for the last, both on the run's on_event and none on stderr. */
TEST(notes_say_a_retry_and_a_traceback) {
  char dir[] = "/tmp/obelus-api-events-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[96];
  snprintf(path, sizeof path, "%s/kaput.lua", dir);
  FILE *f = fopen(path, "w");
  fputs("return { name = 'kaput', run = function(c) error('kaput') end }\n", f);
  fclose(f);
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path), OBELUS_OK);
  obelus_run_options opt = {0};
  opt.on_event = note_event;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run,
                           "[{\"_tool\":\"kaput\",\"_id\":\"a\",\"_outputPath\":\"a\","
                           " \"_retry\":{\"attempts\":2,\"delay_ms\":1}}]",
                           &opt),
            OBELUS_OK);
  notes[0] = '\0';
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 1);
  CHECK(strstr(notes, "retry: call a (kaput): attempt 1 of 2 failed: ") == notes);
  CHECK(strstr(notes, "|traceback: call a (kaput) raised an error:|") != NULL);
  obelus_run_free(run);
  obelus_engine_free(e);
  unlink(path);
  rmdir(dir);
}

static char engine_notes[512];

static void on_engine_note(const char *kind, const char *call_id, const char *msg, void *data) {
  CHECK(data == engine_notes);
  CHECK(call_id == NULL);
  size_t n = strlen(engine_notes);
  snprintf(engine_notes + n, sizeof engine_notes - n, "%s: %s|", kind, msg);
}

/* An error in a tool's libuv callback is no run's: the engine's note hook gets it
 * (obelus_engine_set_notes), and the call goes on. */
TEST(engine_notes_reach_the_hosts_hook) {
  char dir[] = "/tmp/obelus-api-events-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[96];
  snprintf(path, sizeof path, "%s/cb.lua", dir);
  FILE *f = fopen(path, "w");
  fputs("local obelus = require 'obelus'\n"
        "return { name = 'cb', run = function(c)\n"
        "  local t = obelus.uv.new_timer()\n"
        "  t:start(1, 0, function() t:close(); error('cb boom', 0) end)\n"
        "  obelus.sleep(30)\n"
        "  return 1\n"
        "end }\n",
        f);
  fclose(f);
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, path), OBELUS_OK);
  obelus_engine_set_notes(e, on_engine_note, engine_notes);
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, "[{\"_tool\":\"cb\",\"_outputPath\":\"a\"}]", NULL),
            OBELUS_OK);
  engine_notes[0] = '\0';
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 0);
  CHECK(strstr(engine_notes, "callback_error: error in a libuv callback of a tool: cb boom") ==
        engine_notes);
  CHECK(strchr(engine_notes, '|') == strrchr(engine_notes, '|')); /* one note */
  obelus_run_free(run);
  obelus_engine_set_notes(e, NULL, NULL); /* dropped from now on */
  obelus_engine_free(e);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  RUN(events_arrive_in_order_from_the_loop_then_the_completion);
  RUN(events_of_lua_tools_arrive_as_the_loop_turns);
  RUN(notes_say_a_retry_and_a_traceback);
  RUN(engine_notes_reach_the_hosts_hook);
  return TEST_END();
}
