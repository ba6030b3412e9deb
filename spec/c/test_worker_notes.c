/* test_worker_notes.c -- the worker (ob_worker.h) tells its notes and its status to its
 * options' callbacks and writes nothing itself: against a real redis-server started
 * here, a worker with --drain meets a malformed job (a hand-made stream entry), notes
 * it (job: the entry's id; msg: why it failed), sends its status after the note and
 * at its ticks (its name, the counts, Redis up), and a last status with ended set;
 * with no callbacks it runs the same, silent. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "fleet/ob_queue.h"
#include "fleet/ob_worker.h"
#include "test.h"
#include "testredis.h"

typedef struct heard {
  int notes, statuses, ended, ended_at_status, after_note, last_was_note, ended_calls;
  char job[64], msg[512], name[64];
  uint64_t failed;
  int redis_up;
} heard;

static void on_note(void *ud, const char *job, const char *msg) {
  heard *h = ud;
  h->notes++;
  snprintf(h->job, sizeof h->job, "%s", job ? job : "(none)");
  snprintf(h->msg, sizeof h->msg, "%s", msg);
  h->last_was_note = 1;
}

static void on_status(void *ud, const ob_worker_status *st) {
  heard *h = ud;
  h->statuses++;
  if (h->last_was_note)
    h->after_note++;
  h->last_was_note = 0;
  if (st->ended) {
    h->ended_calls++;
    h->ended_at_status = h->statuses;
    return;
  }
  snprintf(h->name, sizeof h->name, "%s", st->name);
  if (st->failed > h->failed)
    h->failed = st->failed;
  h->redis_up |= st->redis_up;
}

static void on_end(void *ud, const char *why) {
  heard *h = ud;
  h->ended = why ? -1 : 1;
}

/* A stream entry no submit would write, in the jobs stream of queue q (no tools). */
static void add_junk(const char *q, char *entry, size_t n) {
  char *key = ob_queue_key(q, "jobs", NULL);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "redis-cli -p %d XADD '%s' '*' junk 1", redis_port, key);
  free(key);
  entry[0] = '\0';
  FILE *p = popen(cmd, "r");
  if (p) {
    if (fgets(entry, (int)n, p))
      entry[strcspn(entry, "\n")] = '\0';
    pclose(p);
  }
}

static void run_worker(const char *q, heard *h, int callbacks) {
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  CHECK(e != NULL);
  if (!e)
    return;
  ob_worker_options o = {.redis = redis_url, .queue = q, .name = "wn", .drain = 1,
                         .dir = redis_dir, .claim_idle_ms = 200};
  if (callbacks) {
    o.on_note = on_note;
    o.on_status = on_status;
    o.note_ud = h;
  }
  ob_worker *w = ob_worker_start(e, &o, on_end, h, &err);
  CHECK(w != NULL);
  if (w) {
    CHECK_STR(ob_worker_name(w), "wn");
    for (int i = 0; i < 3000 && !h->ended; i++)
      uv_run(e->loop, UV_RUN_ONCE);
    CHECK_INT(h->ended, 1);
    ob_worker_stats st;
    ob_worker_get_stats(w, &st);
    CHECK_INT((int)st.failed, 1);
    ob_worker_free(w);
  }
  ob_engine_free(e);
}

TEST(notes_and_status_go_to_the_callbacks) {
  char entry[64];
  add_junk("n1", entry, sizeof entry);
  CHECK(entry[0] != '\0');
  heard h = {0};
  run_worker("n1", &h, 1);
  CHECK_INT(h.notes, 1);
  CHECK_STR(h.job, entry); /* no valid id: the entry's */
  CHECK(strstr(h.msg, "malformed job: its stream entry ") == h.msg);
  CHECK(strstr(h.msg, "; failed") != NULL);
  CHECK(strchr(h.msg, '\n') == NULL);
  CHECK(h.after_note >= 1); /* the status follows the note */
  CHECK_STR(h.name, "wn");
  CHECK_INT((int)h.failed, 1);
  CHECK_INT(h.redis_up, 1);
  CHECK_INT(h.ended_calls, 1);
  CHECK_INT(h.ended_at_status, h.statuses); /* the last one */
}

TEST(no_callbacks_no_notes) {
  char entry[64];
  add_junk("n2", entry, sizeof entry);
  heard h = {0};
  run_worker("n2", &h, 0);
  CHECK_INT(h.notes, 0);
  CHECK_INT(h.statuses, 0);
}

int main(void) {
  start_redis("wnotes");
  if (!redis_url[0]) {
    fprintf(stderr, "redis-server did not start\n");
    return 1;
  }
  RUN(notes_and_status_go_to_the_callbacks);
  RUN(no_callbacks_no_notes);
  stop_redis();
  return TEST_END();
}
