/* test_api_emit.c -- a C tool streams through the public API (obelus.h only):
 * obelus_call_emit sends JSON while the call runs, and the host's on_event gets
 * OBELUS_EVENT_PROGRESS with the text and the attempt, between the call's started and
 * done (which carries the value written), in order; the journal keeps a "progress" record of each. Malformed JSON, and an
 * emit on a handle whose run is gone, are refused. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

typedef struct host {
  char seq[1024];
  int after_done;  /* obelus_call_emit after the call completed */
  int bad_json;    /* obelus_call_emit of malformed JSON */
} host;

static host H;

static void streamer(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  CHECK_INT(obelus_call_emit(call, "{\"step\":1}"), OBELUS_OK);
  H.bad_json = obelus_call_emit(call, "{nope");
  CHECK_INT(obelus_call_emit(call, "[2,\"two\"]"), OBELUS_OK);
  obelus_call_complete(call, "3");
}

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  (void)run, (void)data;
  size_t n = strlen(H.seq);
  if (ev->type == OBELUS_EVENT_PROGRESS)
    snprintf(H.seq + n, sizeof H.seq - n, "%sprogress %s %u %s", n ? ", " : "", ev->call_id,
             ev->attempt, ev->data_json);
  else if (ev->type == OBELUS_EVENT_STARTED)
    snprintf(H.seq + n, sizeof H.seq - n, "%sstarted %s %u", n ? ", " : "", ev->call_id,
             ev->attempt);
  else if (ev->type == OBELUS_EVENT_DONE) /* the value written, its size, not handled */
    snprintf(H.seq + n, sizeof H.seq - n, "%sdone %s %u %s %zu %d", n ? ", " : "", ev->call_id,
             ev->attempt, ev->value_json, ev->value_size, ev->handled);
  else
    CHECK(ev->data_json == NULL);
}

TEST(a_c_tool_streams_to_the_host_and_the_journal) {
  char journal[] = "/tmp/obelus-emit-XXXXXX";
  int fd = mkstemp(journal);
  CHECK(fd >= 0);
  FILE *jf = fdopen(fd, "w");
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "streamer", NULL, streamer, NULL), OBELUS_OK);
  obelus_run_options opt = {.on_event = on_event, .journal = jf};
  obelus_run *r;
  CHECK_INT(obelus_run_new(e, &r,
                           "[{\"_id\":\"s\",\"_tool\":\"streamer\",\"_outputPath\":\"" DAGGER
                           "state.s\"}]",
                           &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(r), OBELUS_OK);
  CHECK_INT(obelus_run_wait(r), 0);
  CHECK_STR(H.seq, "started s 1, progress s 1 {\"step\":1}, progress s 1 [2,\"two\"], done s 1 3 1 0");
  CHECK_INT(H.bad_json, OBELUS_EJSON);
  obelus_run_free(r);
  obelus_engine_free(e);
  fclose(jf);
  /* the journal: two progress records */
  FILE *f = fopen(journal, "r");
  char line[512];
  int records = 0;
  while (f && fgets(line, sizeof line, f))
    records += strstr(line, "{\"journal\":\"progress\",\"id\":\"s\",\"attempt\":1,\"data\":") == line;
  if (f)
    fclose(f);
  CHECK_INT(records, 2);
  unlink(journal);
}

static obelus_call *kept;

static void keeper(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  kept = call; /* kept past its run's end by the test */
}

TEST(an_emit_on_a_handle_whose_run_is_gone_is_refused) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "keeper", NULL, keeper, NULL), OBELUS_OK);
  obelus_run *r;
  CHECK_INT(obelus_run_new(e, &r, "[{\"_tool\":\"keeper\",\"_outputPath\":\"" DAGGER "state.k\"}]",
                           NULL),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(r), OBELUS_OK);
  CHECK(kept != NULL);
  CHECK_INT(obelus_call_emit(kept, "1"), OBELUS_OK);
  obelus_run_free(r); /* the handle is detached: it sends nothing more */
  CHECK_INT(obelus_call_emit(kept, "1"), OBELUS_EINVAL);
  obelus_call_complete(kept, "2"); /* frees the detached handle */
  CHECK_INT(obelus_call_emit(NULL, "1"), OBELUS_EINVAL);
  obelus_engine_free(e);
}

int main(void) {
  RUN(a_c_tool_streams_to_the_host_and_the_journal);
  RUN(an_emit_on_a_handle_whose_run_is_gone_is_refused);
  return TEST_END();
}
