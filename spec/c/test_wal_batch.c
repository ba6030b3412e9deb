/* test_wal_batch.c -- OB_FSYNC_BATCH: a flushed line is fsynced once its window
 * (OB_WAL_BATCH_MS) has passed, not before; flushes never wait
 * for an fsync, even a slow one, and none runs on the loop thread; a stream of
 * flushes costs about one fsync per window, not one per line. NEVER makes no fsync
 * at all, and neither does a file that cannot be synced (/dev/null). Prints what a
 * line costs to add and flush. */
#include "testwal.h"

static uint64_t add_line(ob_wal *w, int i) {
  char line[96];
  int n = snprintf(line, sizeof line, "{\"type\":\"state\",\"data\":{\"line\":%d}}", i);
  return ob_wal_add(w, line, (size_t)n);
}

TEST(a_line_is_fsynced_when_its_window_ends) {
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, in_scratch("window.jsonl"), OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  CHECK_INT(ob_wal_mode(w), OB_FSYNC_BATCH);
  int before = atomic_load(&sync_done);
  uint64_t seq = add_line(w, 1);
  double t0 = now_ms();
  CHECK_INT(ob_wal_flush(w), OB_OK);
  while (ob_wal_durable(w) < seq) /* (one that never comes: spec/run-c's cap) */
    sleep_ms(1);
  double took = now_ms() - t0;
  CHECK_INT(ob_wal_durable(w), seq);
  CHECK(took >= OB_WAL_BATCH_MS * 0.9); /* the window was waited out (load only adds) */
  CHECK_INT(atomic_load(&sync_done), before + 1);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(atomic_load(&sync_done), before + 1); /* close had nothing left to sync */
  printf("# one line durable %.1f ms after its flush (window %d ms)\n", took, OB_WAL_BATCH_MS);
}

/* The fsync is held at the gate until the flushes are done: a flush that waited for
 * it would never return (spec/run-c caps each program). */
TEST(flushes_never_wait_for_a_slow_fsync) {
  ob_error err;
  const char *path = in_scratch("slow.jsonl");
  ob_wal *w = ob_wal_open(NULL, path, OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  int before = atomic_load(&sync_done);
  sync_gate(1);
  add_line(w, 1);
  CHECK_INT(ob_wal_flush(w), OB_OK);
  while (!atomic_load(&sync_in_flight)) /* the window passes, the fsync starts and waits */
    sleep_ms(1);
  for (int i = 2; i <= 200; i++) {
    add_line(w, i);
    CHECK_INT(ob_wal_flush(w), OB_OK);
  }
  CHECK_INT(atomic_load(&sync_in_flight), 1); /* still held: no flush waited for it */
  CHECK_INT(atomic_load(&sync_done), before);
  CHECK_INT((long long)ob_wal_durable(w), 0);
  sync_gate(0);
  CHECK_INT(ob_wal_close(w, &err), OB_OK); /* the one held, then the rest */
  CHECK_INT(atomic_load(&sync_done), before + 2);
  CHECK_INT(atomic_load(&sync_most_in_flight), 1); /* one after the other */
  CHECK_INT(atomic_load(&sync_covered), file_size(path)); /* closed: no NUL tail */
  CHECK_INT(atomic_load(&sync_on_main), 0);
}

TEST(a_stream_of_flushes_costs_one_fsync_a_window) {
  enum { N = 20000 };
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, in_scratch("stream.jsonl"), OB_WAL_CREATE, OB_FSYNC_BATCH, &err);
  int before = atomic_load(&sync_done);
  double t0 = now_ms(), busy = 0;
  for (int i = 1; i <= N; i += 1000) {
    double b0 = now_ms();
    for (int j = i; j < i + 1000; j++) {
      add_line(w, j);
      ob_wal_flush(w);
    }
    busy += now_ms() - b0;
    sleep_ms(5); /* spread the lines over a few windows */
  }
  double elapsed = now_ms() - t0;
  int syncs = atomic_load(&sync_done) - before;
  CHECK(syncs <= elapsed / OB_WAL_BATCH_MS + 2);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(atomic_load(&sync_on_main), 0);
  printf("# %d lines added and flushed one by one over %.1f ms: %.2f us a line; %d fsyncs "
         "(+1 at close)\n",
         N, elapsed, busy * 1000.0 / N, syncs);
}

TEST(never_and_unsyncable_files_make_no_fsync) {
  int before = atomic_load(&sync_calls);
  ob_error err;
  ob_wal *w = ob_wal_open(NULL, in_scratch("never.jsonl"), OB_WAL_CREATE, OB_FSYNC_NEVER, &err);
  for (int i = 1; i <= 100; i++) {
    add_line(w, i);
    ob_wal_flush(w);
  }
  CHECK_INT(ob_wal_durable(w), 100);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  w = ob_wal_open(NULL, "/dev/null", OB_WAL_CREATE, OB_FSYNC_ALWAYS, &err);
  CHECK(w != NULL);
  CHECK_INT(ob_wal_mode(w), OB_FSYNC_NEVER); /* a device cannot be synced */
  add_line(w, 1);
  CHECK_INT(ob_wal_flush(w), OB_OK);
  CHECK_INT(ob_wal_durable(w), 1);
  CHECK_INT(ob_wal_close(w, &err), OB_OK);
  CHECK_INT(atomic_load(&sync_calls), before);
}

int main(void) {
  sync_reset();
  scratch_make("wal-batch");
  RUN(a_line_is_fsynced_when_its_window_ends);
  RUN(flushes_never_wait_for_a_slow_fsync);
  RUN(a_stream_of_flushes_costs_one_fsync_a_window);
  RUN(never_and_unsyncable_files_make_no_fsync);
  scratch_remove();
  return TEST_END();
}
