/* test_wal_run_always.c -- a run's journal under --fsync always: a call starts only
 * once what it reads is on disk. Each fsync is slowed down (30 ms), so a reader
 * started as soon as its writer settled would find the writer's "settled" line not
 * yet covered by any fsync. The tools, written in C, look at the journal when they
 * start: every line up to the last "settled" record must be within what a completed
 * fdatasync covered. Under --fsync batch the same plan runs without waiting (its
 * first reader starts before any fsync has covered its writer: the test shows that
 * the check can fail). */
#include "engine/ob_engine.h"
#include "engine/ob_run.h"
#include "testwal.h"

typedef struct seen {
  const char *journal;
  int starts, covered; /* tools started; of them, those whose inputs were on disk */
} seen;

/* The end of the last "settled" record in the journal (0: none yet). */
static long long settled_end(const char *path) {
  size_t len;
  char *text = slurp(path, &len);
  long long end = 0;
  for (char *p = text; p && (p = strstr(p, "{\"journal\":\"settled\"")); p++) {
    char *nl = strchr(p, '\n');
    if (nl)
      end = (long long)(nl + 1 - text);
  }
  free(text);
  return end;
}

static void add_one(ob_call_handle *h, const ob_value *params, void *data) {
  seen *s = data;
  long long need = settled_end(s->journal);
  s->starts++;
  if (atomic_load(&sync_covered) >= need)
    s->covered++;
  ob_value *r = ob_int(ob_int_value(ob_object_get(params, "x", 1)) + 1);
  ob_call_complete(h, 0, r, NULL);
  ob_unref(r);
}

static const char plan_json[] =
    "[{\"_tool\":\"add_one\",\"x\":1,\"_outputPath\":\"a\"},"
    " {\"_tool\":\"add_one\",\"x\":\"\xE2\x80\xA0state.a\",\"_outputPath\":\"b\"},"
    " {\"_tool\":\"add_one\",\"x\":\"\xE2\x80\xA0state.b\",\"_outputPath\":\"c\"},"
    " {\"_tool\":\"add_one\",\"x\":\"\xE2\x80\xA0state.c\",\"_outputPath\":\"d\"}]";

/* Runs the chain with a journal under mode; fills s; returns the final state's d. */
static int64_t run_chain(ob_fsync mode, seen *s) {
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(e != NULL);
  CHECK(ob_engine_add_tool(e, "add_one", NULL, add_one, s, &err) == OB_OK);
  ob_value *pv = ob_json_parse(plan_json, strlen(plan_json), &err);
  ob_plan *p = ob_plan_from_value(pv, "chain.json");
  ob_plan_check_tools(p, &e->tools, 0);
  CHECK_INT((int)p->nerrors, 0);
  ob_wal *w = ob_wal_open(e->loop, s->journal, OB_WAL_CREATE, mode, &err);
  CHECK(w != NULL);
  ob_run_options ro = {.journal = w};
  ob_run *r = ob_run_new(e, p, pv, NULL, &ro, &err);
  ob_run_start(r);
  while (!ob_run_finished(r) && uv_run(e->loop, UV_RUN_ONCE))
    ;
  CHECK(ob_run_finished(r));
  ob_value *out = ob_run_output(r);
  ob_value *d = ob_object_get(out, "d", 1);
  int64_t got = d ? ob_int_value(d) : -1;
  ob_unref(out);
  ob_run_detach_journal(e, w);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  ob_run_free(r);
  ob_engine_free(e);
  ob_plan_free(p);
  ob_unref(pv);
  return got;
}

TEST(always_starts_a_reader_once_its_writer_is_on_disk) {
  sync_reset();
  scratch_make("run-always");
  atomic_store(&sync_delay_ms, 30);
  seen s = {in_scratch("always.jsonl"), 0, 0};
  CHECK_INT((int)run_chain(OB_FSYNC_ALWAYS, &s), 5);
  CHECK_INT(s.starts, 4);
  CHECK_INT(s.covered, 4); /* the first reads nothing settled; the others waited */
  CHECK_INT(atomic_load(&sync_on_main), 0);
  scratch_remove();
}

TEST(batch_does_not_wait_so_the_check_above_can_fail) {
  sync_reset();
  scratch_make("run-batch");
  atomic_store(&sync_delay_ms, 30);
  seen s = {in_scratch("batch.jsonl"), 0, 0};
  CHECK_INT((int)run_chain(OB_FSYNC_BATCH, &s), 5);
  CHECK_INT(s.starts, 4);
  CHECK(s.covered < 4); /* readers started before their writer's line was synced */
  scratch_remove();
}

int main(void) {
  RUN(always_starts_a_reader_once_its_writer_is_on_disk);
  RUN(batch_does_not_wait_so_the_check_above_can_fail);
  return TEST_END();
}
