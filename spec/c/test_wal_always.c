/* test_wal_always.c -- OB_FSYNC_ALWAYS and ob_wal_when_durable: every waiter is
 * called once, on the loop thread, from the loop (never from within the wal's
 * functions), after an fsync that started once its line was written completed;
 * lines that arrive while an fsync runs share the next one (group commit: far fewer
 * fsyncs than lines); no fsync runs on the loop thread; the loop stays alive while
 * waiters wait, and not after. A buffered line waits for its flush; NEVER calls
 * back on the loop's turn after the flush, BATCH after the window's fsync; a line
 * never added cannot be waited for. */
#include "testwal.h"

enum { LINES = 100 };

typedef struct rec {
  uint64_t seq;
  long long end; /* the file's size once the line was flushed */
  int calls, status, on_main, durable_then, covered_then, order;
} rec;

typedef struct feed {
  ob_wal *w;
  uv_timer_t timer;
  rec recs[LINES + 1];
  int added, called, inside_wal;
} feed;

static feed F;

static void on_durable(void *ud, int status) {
  rec *r = ud;
  r->calls++;
  r->status = status;
  r->on_main = pthread_equal(pthread_self(), main_thread);
  r->durable_then = ob_wal_durable(F.w) >= r->seq;
  r->covered_then = atomic_load(&sync_covered) >= r->end;
  r->order = ++F.called;
  CHECK(!F.inside_wal); /* never called from within the wal's functions */
}

/* One line a millisecond: added, flushed, waited for. */
static void on_tick(uv_timer_t *t) {
  char line[96];
  int n = snprintf(line, sizeof line, "{\"type\":\"state\",\"data\":{\"line\":%d}}", F.added + 1);
  F.inside_wal = 1;
  uint64_t seq = ob_wal_add(F.w, line, (size_t)n);
  CHECK_INT(ob_wal_flush(F.w), OB_OK);
  rec *r = &F.recs[seq];
  r->seq = seq;
  r->end = lines_size(ob_wal_path(F.w));
  CHECK_INT(ob_wal_when_durable(F.w, seq, on_durable, r), OB_OK);
  F.inside_wal = 0;
  if (++F.added == LINES)
    uv_timer_stop(t);
}

TEST(each_waiter_is_called_once_after_its_line_is_on_disk_group_committed) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  memset(&F, 0, sizeof F);
  atomic_store(&sync_delay_ms, 20); /* an fsync takes 20 ms: lines pile up meanwhile */
  ob_error err;
  F.w = ob_wal_open(&loop, in_scratch("always.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  CHECK_INT(ob_wal_mode(F.w), OB_FSYNC_ALWAYS);
  uv_timer_init(&loop, &F.timer);
  uv_timer_start(&F.timer, on_tick, 1, 1);
  uv_run(&loop, UV_RUN_DEFAULT); /* returns when the last waiter has been called */
  int ok = 1;
  for (int i = 1; i <= LINES; i++) {
    rec *r = &F.recs[i];
    ok &= r->calls == 1 && r->status == OB_OK && r->on_main && r->durable_then && r->covered_then;
    ok &= i == 1 || r->order > F.recs[i - 1].order; /* durability comes in line order */
    if (!ok) {
      fprintf(stderr, "  line %d (ends at %lld, fsyncs covered %lld): calls %d status %d main %d durable %d covered %d order %d\n", i, r->end, (long long)atomic_load(&sync_covered),
              r->calls, r->status, r->on_main, r->durable_then, r->covered_then, r->order);
      break;
    }
  }
  CHECK(ok);
  CHECK_INT(F.called, LINES);
  int syncs = atomic_load(&sync_done);
  CHECK(syncs >= 2 && syncs <= LINES / 4); /* about one per 20 ms, not one per line */
  CHECK_INT(ob_wal_fsyncs(F.w), syncs);
  CHECK_INT(atomic_load(&sync_on_main), 0);
  CHECK_INT(uv_loop_alive(&loop), 0); /* nobody waits: the wal holds no handle */
  CHECK_INT(ob_wal_close(F.w, &err), OB_OK);
  uv_close((uv_handle_t *)&F.timer, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(uv_loop_close(&loop), 0);
  printf("# %d lines, %d fsyncs of 20 ms\n", LINES, syncs);
}

static int late_calls;
static void count_call(void *ud, int status) {
  late_calls++;
  *(int *)ud = status;
}

static void on_stop(uv_timer_t *t) { uv_stop(t->loop); }

/* Runs the loop for ms milliseconds at most (or until it has nothing to do). */
static void run_for(uv_loop_t *loop, int ms) {
  uv_timer_t t;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, on_stop, (uint64_t)ms, 0);
  uv_unref((uv_handle_t *)&t);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

TEST(a_durable_line_is_still_announced_from_the_loop) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  atomic_store(&sync_delay_ms, 0);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("late.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  ob_wal_flush(w);
  double t0 = now_ms();
  while (ob_wal_durable(w) < seq && now_ms() - t0 < 5000)
    sleep_ms(1);
  CHECK_INT(ob_wal_durable(w), seq);
  int status = 99;
  late_calls = 0;
  CHECK_INT(ob_wal_when_durable(w, seq, count_call, &status), OB_OK);
  CHECK_INT(late_calls, 0); /* not from within when_durable */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(late_calls, 1);
  CHECK_INT(status, OB_OK);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(a_buffered_line_waits_for_its_flush) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("buffered.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  int status = 99;
  late_calls = 0;
  CHECK_INT(ob_wal_when_durable(w, seq, count_call, &status), OB_OK);
  run_for(&loop, 100);
  CHECK_INT(late_calls, 0);
  CHECK_INT(ob_wal_durable(w), 0);
  ob_wal_flush(w);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(late_calls, 1);
  CHECK_INT(status, OB_OK);
  CHECK_INT(ob_wal_durable(w), 1);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(never_calls_back_on_the_turn_after_the_flush_and_batch_after_its_fsync) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("never.jsonl"), OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  int status = 99;
  late_calls = 0;
  CHECK_INT(ob_wal_when_durable(w, ob_wal_add(w, "{}", 2), count_call, &status), OB_OK);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(late_calls, 0); /* buffered */
  ob_wal_flush(w);
  CHECK_INT(late_calls, 0);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(late_calls, 1);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);

  int before = atomic_load(&sync_done);
  w = ob_wal_open(&loop, in_scratch("batch.jsonl"), OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  ob_wal_flush(w);
  long long end = lines_size(ob_wal_path(w));
  double t0 = now_ms();
  CHECK_INT(ob_wal_when_durable(w, seq, count_call, &status), OB_OK);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(late_calls, 2);
  CHECK(now_ms() - t0 >= OB_WAL_BATCH_MS * 0.8); /* it waited for the window's fsync */
  CHECK_INT(atomic_load(&sync_done), before + 1);
  CHECK(atomic_load(&sync_covered) >= end);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(only_lines_added_can_be_waited_for) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("bad.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  int status;
  CHECK_INT(ob_wal_when_durable(w, 0, count_call, &status), OB_EINVAL);
  CHECK_INT(ob_wal_when_durable(w, 1, count_call, &status), OB_EINVAL);
  ob_wal_add(w, "{}", 2);
  CHECK_INT(ob_wal_when_durable(w, 2, count_call, &status), OB_EINVAL);
  CHECK_INT(uv_loop_alive(&loop), 0); /* nothing was registered */
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  w = ob_wal_open(NULL, in_scratch("noloop.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  CHECK_INT(ob_wal_when_durable(w, ob_wal_add(w, "{}", 2), count_call, &status), OB_EINVAL);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  sync_reset();
  scratch_make("wal-always");
  RUN(each_waiter_is_called_once_after_its_line_is_on_disk_group_committed);
  RUN(a_durable_line_is_still_announced_from_the_loop);
  RUN(a_buffered_line_waits_for_its_flush);
  RUN(never_calls_back_on_the_turn_after_the_flush_and_batch_after_its_fsync);
  RUN(only_lines_added_can_be_waited_for);
  scratch_remove();
  return TEST_END();
}
