/* test_wal_close.c -- ob_wal_close is synchronous and leaves nothing behind: with an
 * fsync in flight it waits for it, writes and fsyncs what was still buffered, and
 * the loop can be closed at once without running again; in BATCH it ends the
 * window early rather than wait it out; waiters still registered are dropped, never
 * called (their handle needs the loop's next turn, nothing more); a waiter may
 * close the wal, and the waiters after it are then not called. */
#include "testwal.h"

static void wait_for_fsync_in_flight(void) {
  double t0 = now_ms();
  while (!atomic_load(&sync_in_flight) && now_ms() - t0 < 5000)
    sleep_ms(1);
}

TEST(close_waits_for_the_fsync_in_flight_then_syncs_the_rest) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  atomic_store(&sync_delay_ms, 300);
  int before = atomic_load(&sync_done);
  ob_error err;
  const char *path = in_scratch("inflight.jsonl");
  ob_wal *w = ob_wal_open(&loop, path, OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  ob_wal_add(w, "{\"a\":1}", 7);
  ob_wal_flush(w);
  wait_for_fsync_in_flight();
  CHECK(atomic_load(&sync_in_flight));
  ob_wal_add(w, "{\"b\":2}", 7); /* still buffered */
  double t0 = now_ms();
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  double took = now_ms() - t0;
  CHECK_INT(atomic_load(&sync_in_flight), 0);
  CHECK_INT(atomic_load(&sync_done), before + 2); /* the one in flight, and the last */
  CHECK(took >= 300);                             /* the last one, at least */
  CHECK_INT(atomic_load(&sync_covered), 16);      /* it covered both lines */
  char *text = slurp(path, NULL);
  CHECK_STR(text, "{\"a\":1}\n{\"b\":2}\n");
  free(text);
  CHECK_INT(uv_loop_close(&loop), 0); /* no handle, no request left: no turn needed */
  atomic_store(&sync_delay_ms, 0);
}

/* the window is an hour: a close that waited it out would never return here (spec/run-c
 * caps each program) */
TEST(close_ends_the_batch_window_early) {
  int before = atomic_load(&sync_done);
  atomic_store(&sync_covered, 0);
  ob_error err;
  const char *path = in_scratch("window.jsonl");
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  ob_wal_set_window(w, 3600 * 1000);
  ob_wal_add(w, "{\"a\":1}", 7);
  ob_wal_flush(w);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(atomic_load(&sync_done), before + 1);
  CHECK_INT(atomic_load(&sync_covered), file_size(path));
}

static int calls;
static void count(void *ud, int status) { calls++; }

TEST(waiters_left_at_close_are_dropped) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  atomic_store(&sync_delay_ms, 100);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("dropped.jsonl"), OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  uint64_t seq = ob_wal_add(w, "{}", 2);
  ob_wal_flush(w);
  wait_for_fsync_in_flight();
  calls = 0;
  CHECK_INT(ob_wal_when_durable(w, seq, count, NULL), OB_OK);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(calls, 0);
  uv_run(&loop, UV_RUN_NOWAIT); /* the waiters' handle closes */
  CHECK_INT(calls, 0);
  CHECK_INT(uv_loop_close(&loop), 0);
  atomic_store(&sync_delay_ms, 0);
}

static ob_wal *closing_wal;
static void close_from_waiter(void *ud, int status) {
  calls++;
  ob_error err;
  CHECK_INT(ob_wal_close(closing_wal, &err), OB_OK);
}

TEST(a_waiter_may_close_the_wal) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_wal *w = ob_wal_open(&loop, in_scratch("reentrant.jsonl"), OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  closing_wal = w;
  calls = 0;
  uint64_t a = ob_wal_add(w, "{}", 2), b = ob_wal_add(w, "{}", 2);
  ob_wal_flush(w);
  CHECK_INT(ob_wal_when_durable(w, a, close_from_waiter, NULL), OB_OK);
  CHECK_INT(ob_wal_when_durable(w, b, count, NULL), OB_OK); /* ready at the same time */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(calls, 1); /* the second was dropped by the close */
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(an_empty_journal_opens_and_closes) {
  ob_error err;
  const char *path = in_scratch("empty.jsonl");
  int before = atomic_load(&sync_calls);
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(file_size(path), -1); /* no line, no file (it appears with its first lines) */
  CHECK_INT(atomic_load(&sync_calls), before); /* nothing to sync */
  CHECK_INT(ob_wal_close(NULL, &err), OB_OK);
}

int main(void) {
  sync_reset();
  scratch_make("wal-close");
  RUN(close_waits_for_the_fsync_in_flight_then_syncs_the_rest);
  RUN(close_ends_the_batch_window_early);
  RUN(waiters_left_at_close_are_dropped);
  RUN(a_waiter_may_close_the_wal);
  RUN(an_empty_journal_opens_and_closes);
  scratch_remove();
  return TEST_END();
}
