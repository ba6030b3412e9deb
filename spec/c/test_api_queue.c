/* test_api_queue.c -- the job queue from C through the public API, against a real
 * redis-server started here (a free port, a temporary folder) and a real `obelus
 * worker` (bin/obelus): a host submits plans and waits for their results on its
 * own loop; an invalid plan is refused with its problems; a wait times out; an
 * unreachable Redis is named; a queue freed with a wait in progress calls nothing
 * back and leaks nothing (ASan). */
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"
#include "testredis.h"

#define D "\xE2\x80\xA0"

static char tools[128];

/* the server, and the tool file the worker runs, in its folder */
static void start(void) {
  start_redis("queue");
  snprintf(tools, sizeof tools, "%s/double.lua", redis_dir);
  FILE *f = fopen(tools, "w");
  fputs("return { name = 'double', schema = { type = 'object', required = { 'n' } },\n"
        "  run = function(call) return call.n * 2 end }\n",
        f);
  fclose(f);
}

/* `obelus worker --drain` on the queue, to the end */
static int worker(const char *queue) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "timeout 30 bin/obelus worker --redis %s --queue %s --tools %s --drain 2>/dev/null",
           redis_url, queue, tools);
  return system(cmd);
}

typedef struct got {
  int calls, exit;
  char job[64], output[256], error[256];
} got;

static void submitted(obelus_queue *q, const char *job, const char *error, void *data) {
  got *g = data;
  (void)q;
  g->calls++;
  snprintf(g->job, sizeof g->job, "%s", job ? job : "");
  snprintf(g->error, sizeof g->error, "%s", error ? error : "");
}

static void finished(obelus_queue *q, const char *job, int exit, const char *output,
                     const char *error, void *data) {
  got *g = data;
  (void)q;
  g->calls++;
  g->exit = exit;
  snprintf(g->job, sizeof g->job, "%s", job);
  snprintf(g->output, sizeof g->output, "%s", output ? output : "");
  snprintf(g->error, sizeof g->error, "%s", error ? error : "");
}

static void turn_until(uv_loop_t *loop, const int *calls) {
  for (int i = 0; i < 100000 && !*calls; i++)
    uv_run(loop, UV_RUN_ONCE);
}

TEST(a_host_submits_and_waits_on_its_own_loop) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_queue *q;
  CHECK_INT(obelus_queue_new(&q, &loop, redis_url, "c1"), OBELUS_OK);
  got s1 = {0}, s2 = {0};
  const char *plan = "{\"plan\":[{\"_tool\":\"double\",\"n\":\"" D "input.n\",\"_outputPath\":\"" D
                     "state.a\"}],\"output\":\"" D "state.a\"}";
  CHECK_INT(obelus_queue_submit(q, NULL, plan, "{\"n\":21}", "c.json", submitted, &s1), OBELUS_OK);
  CHECK_INT(obelus_queue_submit(q, NULL, plan, "{\"n\":5}", "c.json", submitted, &s2), OBELUS_OK);
  turn_until(&loop, &s1.calls);
  turn_until(&loop, &s2.calls);
  CHECK_STR(s1.error, "");
  CHECK(s1.job[0] && strcmp(s1.job, s2.job));
  /* no worker yet: the wait times out */
  got t = {0};
  CHECK_INT(obelus_queue_wait(q, s1.job, 200, finished, &t), OBELUS_OK);
  turn_until(&loop, &t.calls);
  CHECK_INT(t.exit, -1);
  CHECK_STR(t.error, "timeout");
  CHECK_INT(worker("c1"), 0);
  got r1 = {0}, r2 = {0};
  CHECK_INT(obelus_queue_wait(q, s2.job, 5000, finished, &r2), OBELUS_OK);
  CHECK_INT(obelus_queue_wait(q, s1.job, 5000, finished, &r1), OBELUS_OK);
  turn_until(&loop, &r1.calls);
  turn_until(&loop, &r2.calls);
  CHECK_INT(r1.exit, 0);
  CHECK_STR(r1.output, "42");
  CHECK_STR(r1.error, "");
  CHECK_STR(r2.output, "10");
  got nope = {0};
  CHECK_INT(obelus_queue_wait(q, "no-such-job", 0, finished, &nope), OBELUS_OK);
  turn_until(&loop, &nope.calls);
  CHECK_INT(nope.exit, -1);
  CHECK_STR(nope.error, "no such job");
  obelus_queue_free(q);
  while (uv_run(&loop, UV_RUN_NOWAIT))
    ;
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(an_engine_validates_and_routes_by_its_tool_files) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tools), OBELUS_OK);
  uv_loop_t *loop = obelus_engine_loop(e);
  obelus_queue *q;
  CHECK_INT(obelus_queue_new(&q, loop, redis_url, "c2"), OBELUS_OK);
  got s = {0};
  /* refused before anything is sent: the tool's schema requires n */
  CHECK_INT(obelus_queue_submit(q, e, "[{\"_tool\":\"double\",\"_outputPath\":\"" D "state.a\"}]",
                                NULL, "bad.json", submitted, &s),
            OBELUS_EINVAL);
  CHECK(strstr(obelus_queue_errmsg(q), "bad.json") != NULL);
  CHECK(strstr(obelus_queue_errmsg(q), "n") != NULL);
  CHECK_INT(obelus_queue_submit(q, e, "[{\"_tool\":\"double\",\"n\":4,\"_outputPath\":\"" D "state.a\"}]",
                                "{not json", "x.json", submitted, &s),
            OBELUS_EJSON);
  CHECK_INT(obelus_queue_submit(q, e, "[{\"_tool\":\"double\",\"n\":4,\"_outputPath\":\"" D "state.a\"}]",
                                NULL, "good.json", submitted, &s),
            OBELUS_OK);
  turn_until(loop, &s.calls);
  CHECK_STR(s.error, "");
  CHECK_INT(worker("c2"), 0);
  got r = {0};
  CHECK_INT(obelus_queue_wait(q, s.job, 5000, finished, &r), OBELUS_OK);
  turn_until(loop, &r.calls);
  CHECK_INT(r.exit, 0);
  CHECK_STR(r.output, "{\"a\":8}");
  obelus_queue_free(q);
  obelus_engine_free(e);
}

TEST(an_unreachable_redis_is_named_and_a_freed_queue_calls_nothing_back) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_queue *q;
  CHECK_INT(obelus_queue_new(&q, &loop, "ftp://x", NULL), OBELUS_EINVAL);
  char closed[64];
  snprintf(closed, sizeof closed, "redis://127.0.0.1:%d", free_port());
  CHECK_INT(obelus_queue_new(&q, &loop, closed, NULL), OBELUS_OK);
  got s = {0}, w = {0};
  CHECK_INT(obelus_queue_submit(q, NULL, "[]", NULL, NULL, submitted, &s), OBELUS_OK);
  CHECK_INT(obelus_queue_wait(q, "1", 0, finished, &w), OBELUS_OK);
  turn_until(&loop, &s.calls);
  turn_until(&loop, &w.calls);
  CHECK_STR(s.job, "");
  CHECK(strstr(s.error, "cannot reach Redis at redis://127.0.0.1:") != NULL);
  CHECK(strstr(w.error, "cannot reach Redis at redis://127.0.0.1:") != NULL);
  obelus_queue_free(q);
  /* a wait in progress on a live Redis, then the queue freed: no callback */
  CHECK_INT(obelus_queue_new(&q, &loop, redis_url, "c3"), OBELUS_OK);
  got never = {0}, early = {0};
  CHECK_INT(obelus_queue_wait(q, "1", 0, finished, &never), OBELUS_OK);
  CHECK_INT(obelus_queue_submit(q, NULL, "[]", NULL, NULL, submitted, &early), OBELUS_OK);
  for (int i = 0; i < 20; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  obelus_queue_free(q);
  while (uv_run(&loop, UV_RUN_NOWAIT))
    ;
  CHECK_INT(never.calls, 0);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  start();
  if (!redis_url[0]) {
    fprintf(stderr, "redis-server did not start\n");
    return 1;
  }
  RUN(a_host_submits_and_waits_on_its_own_loop);
  RUN(an_engine_validates_and_routes_by_its_tool_files);
  RUN(an_unreachable_redis_is_named_and_a_freed_queue_calls_nothing_back);
  stop_redis();
  return TEST_END();
}
