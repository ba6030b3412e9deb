/* test_ui_fleet.c -- the fleet as `obelus ui` serves it (host/ob_ui_fleet.c), against a
 * real redis-server started here (a free port, a temporary folder) and real `obelus
 * worker`s (bin/obelus): jobs done and failed by two workers are counted per worker and
 * for the queue, listed with their states and workers, and seen as runs whose journals
 * (read from Redis) give the same run as the file does; a sharded job is listed by its
 * parts; a worker killed with SIGKILL goes
 * silent and its job is taken over and counted; a job that kills every worker it meets is
 * killed-resumable while nobody runs it, then poison after --max-deliveries; a Redis that
 * dies is a state ("unreachable: ...") with the last data kept, and one that comes back is
 * "ok" again (a run read then on a connection made before; job ids given out again from 1
 * are read as the new jobs they are, also after a FLUSHALL between two samples); a Redis stopped (SIGSTOP) is
 * "unreachable" after 5 s, not a hang; the sampler closes and frees with nothing left on the loop (ASan: no leak). */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "host/ob_trace.h"
#include "host/ob_ui_fleet.h"
#include "fleet/ob_queue_journal.h"
#include "test.h"
#include "testredis.h"

#define D "\xE2\x80\xA0"
#define Q "uf"

static char tools[128];
static uv_loop_t loop;
static ob_ui_fleet *fl;

/* --- files, processes ---------------------------------------------------------------------- */

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void setup(void) {
  start_redis("uifleet");
  snprintf(tools, sizeof tools, "%s/tools", redis_dir);
  mkdir(tools, 0700);
  char p[256];
  snprintf(p, sizeof p, "%s/step.lua", tools);
  write_file(p, "local obelus = require 'obelus'\n"
                "return { name = 'step', schema = { type = 'object', required = { 'n' } },\n"
                "  run = function(call) if call.ms then obelus.sleep(call.ms) end return call.n * 2 end }\n");
  snprintf(p, sizeof p, "%s/fail.lua", tools);
  write_file(p, "return { name = 'fail', schema = { type = 'object' },\n"
                "  run = function() error('no good') end }\n");
  snprintf(p, sizeof p, "%s/die.lua", tools);
  write_file(p, "local obelus = require 'obelus'\n"
                "return { name = 'die', schema = { type = 'object' },\n"
                "  run = function() obelus.uv.kill(obelus.uv.os_getpid(), 'sigkill') obelus.sleep(1000) end }\n");
}

static const char *plan_file(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", redis_dir, name);
  write_file(path, text);
  return path;
}

/* `obelus submit` of plan (with a batch file, or none): the ids, one a line, into ids[]. */
static int submit(const char *plan, const char *batch, char ids[][32], int max) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "timeout 30 bin/obelus submit %s --redis %s --queue " Q " --tools %s %s%s",
           plan, redis_url, tools, batch ? "--batch " : "", batch ? batch : "");
  FILE *p = popen(cmd, "r");
  int n = 0;
  char line[64];
  while (p && n < max && fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    snprintf(ids[n++], 32, "%.31s", line);
  }
  if (p)
    pclose(p);
  return n;
}

/* A worker in the background, named name: --jobs 2, --claim-idle 400, --max-deliveries 2. */
static pid_t start_worker(const char *name) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never left running after the test, however it ends */
    char log[256];
    snprintf(log, sizeof log, "%s/%s.log", redis_dir, name);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl("bin/obelus", "obelus", "worker", "--redis", redis_url, "--queue", Q, "--tools", tools,
          "--jobs", "2", "--claim-idle", "400", "--max-deliveries", "2", "--name", name,
          (char *)NULL);
    _exit(127);
  }
  return pid;
}

static void start_redis_again(void) {
  char ports[16];
  snprintf(ports, sizeof ports, "%d", redis_port);
  fflush(stdout);
  redis_pid = fork();
  if (redis_pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
      _exit(127);
    execlp("redis-server", "redis-server", "--port", ports, "--bind", "127.0.0.1", "--dir",
           redis_dir, "--save", "", "--appendonly", "no", "--loglevel", "warning", (char *)NULL);
    _exit(127);
  }
}

/* --- the snapshot ------------------------------------------------------------------------------ */

static const ob_value *get(const ob_value *o, const char *k) {
  return o && ob_typeof(o) == OB_OBJECT ? ob_object_get(o, k, strlen(k)) : NULL;
}
static long long num(const ob_value *v) { return v && ob_typeof(v) == OB_INT ? ob_int_value(v) : -1; }
static const char *str(const ob_value *v) {
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : "";
}
static int is_null(const ob_value *v) { return v && ob_typeof(v) == OB_NULL; }

/* The member of array a whose k is val, or NULL. */
static const ob_value *find(const ob_value *a, const char *k, const char *val) {
  for (size_t i = 0; a && ob_typeof(a) == OB_ARRAY && i < ob_array_len(a); i++)
    if (!strcmp(str(get(ob_array_get(a, i), k)), val))
      return ob_array_get(a, i);
  return NULL;
}

static const ob_value *queue0(const ob_value *s) {
  const ob_value *qs = get(s, "queues");
  return qs && ob_typeof(qs) == OB_ARRAY && ob_array_len(qs) == 1 ? ob_array_get(qs, 0) : NULL;
}

typedef int (*pred)(const ob_value *snap, void *ud);

/* Runs the loop until pred holds of the snapshot (at most secs): 1, or 0. */
static int until(pred p, void *ud, int secs) {
  time_t end = time(NULL) + secs;
  while (time(NULL) < end) {
    uv_run(&loop, UV_RUN_ONCE);
    ob_value *s = ob_ui_fleet_snapshot(fl);
    int ok = p(s, ud);
    ob_unref(s);
    if (ok)
      return 1;
  }
  return 0;
}

static void run_for_samples(uint64_t n) {
  uint64_t want = ob_ui_fleet_samples(fl) + n;
  time_t end = time(NULL) + 20;
  while (ob_ui_fleet_samples(fl) < want && time(NULL) < end)
    uv_run(&loop, UV_RUN_ONCE);
}

/* --- the tests ----------------------------------------------------------------------------------- */

static char ids[8][32], slow[1][32], die[1][32];
static pid_t wa, wb, wc, wd;

static int sampled_ok(const ob_value *s, void *ud) {
  (void)ud;
  return !strcmp(str(get(s, "redis")), "ok") && num(get(s, "sampled")) > 0;
}

TEST(an_empty_queue_is_sampled) {
  CHECK(until(sampled_ok, NULL, 20));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  CHECK_STR(str(get(s, "redis")), "ok");
  CHECK_STR(str(get(s, "queue")), Q);
  CHECK_INT(ob_array_len(get(s, "workers")), 0);
  CHECK_INT(ob_array_len(get(s, "jobs")), 0);
  CHECK_INT(ob_array_len(get(s, "poison")), 0);
  const ob_value *q = queue0(s);
  CHECK_STR(str(get(q, "name")), Q);
  CHECK_INT(num(get(q, "waiting")), 0);
  CHECK_INT(num(get(q, "running")), 0);
  CHECK_INT(num(get(q, "done")), 0);
  CHECK_INT(num(get(q, "failed")), 0);
  CHECK_INT(num(get(q, "poison")), 0);
  ob_unref(s);
  ob_value *runs = ob_ui_fleet_runs(fl);
  CHECK_INT(ob_array_len(runs), 0);
  ob_unref(runs);
}

/* the seven ended, and the workers' entries (written every tick) say so too */
static int seven_ended(const ob_value *s, void *ud) {
  (void)ud;
  const ob_value *q = queue0(s), *w = get(s, "workers");
  const ob_value *a = find(w, "name", "wa"), *b = find(w, "name", "wb");
  return num(get(q, "done")) == 6 && num(get(q, "failed")) == 1 &&
         ob_array_len(get(s, "jobs")) == 7 && num(get(a, "done")) + num(get(b, "done")) == 6 &&
         num(get(a, "failed")) + num(get(b, "failed")) == 1;
}

static int waiting_seven(const ob_value *s, void *ud) {
  (void)ud;
  return num(get(queue0(s), "waiting")) == 7;
}

TEST(two_workers_jobs_done_and_failed_are_counted_and_listed) {
  const char *plan = plan_file("step.json", "{\"plan\":[{\"_tool\":\"step\",\"n\":\"" D "input.n\","
                                            "\"_outputPath\":\"" D "state.a\"}],\"output\":\"" D "state.a\"}");
  char batch[256];
  snprintf(batch, sizeof batch, "%s/batch.jsonl", redis_dir);
  write_file(batch, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n{\"n\":6}\n");
  CHECK_INT(submit(plan, batch, ids, 6), 6);
  const char *bad = plan_file("fail.json", "[{\"_tool\":\"fail\",\"_outputPath\":\"" D "state.a\"}]");
  CHECK_INT(submit(bad, NULL, ids + 6, 1), 1);
  /* queued, no worker yet: seven waiting */
  CHECK(until(waiting_seven, NULL, 20));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  const ob_value *j = find(get(s, "jobs"), "job", ids[0]);
  CHECK_STR(str(get(j, "state")), "waiting");
  CHECK(is_null(get(j, "worker")) && is_null(get(j, "started")) && is_null(get(j, "ended")));
  /* newest first */
  CHECK_STR(str(get(ob_array_get(get(s, "jobs"), 0), "job")), ids[6]);
  ob_unref(s);

  wa = start_worker("wa");
  wb = start_worker("wb");
  CHECK(until(seven_ended, NULL, 60));
  s = ob_ui_fleet_snapshot(fl);
  const ob_value *q = queue0(s);
  CHECK_INT(num(get(q, "waiting")), 0);
  CHECK_INT(num(get(q, "running")), 0);
  CHECK_INT(num(get(q, "done")), 6);
  CHECK_INT(num(get(q, "failed")), 1);
  CHECK_INT(num(get(q, "poison")), 0);
  const ob_value *jobs = get(s, "jobs");
  CHECK_INT(ob_array_len(jobs), 7);
  for (int i = 0; i < 7; i++) {
    j = find(jobs, "job", ids[i]);
    CHECK_STR(str(get(j, "state")), i < 6 ? "done" : "failed");
    const char *w = str(get(j, "worker"));
    CHECK(!strcmp(w, "wa") || !strcmp(w, "wb"));
    CHECK(num(get(j, "started")) > 0 && num(get(j, "ended")) >= num(get(j, "started")));
  }
  const ob_value *workers = get(s, "workers");
  CHECK_INT(ob_array_len(workers), 2);
  const ob_value *a = find(workers, "name", "wa"), *b = find(workers, "name", "wb");
  CHECK_STR(str(get(a, "state")), "live");
  CHECK_STR(str(get(b, "state")), "live");
  CHECK_INT(num(get(a, "done")) + num(get(b, "done")), 6);
  CHECK_INT(num(get(a, "failed")) + num(get(b, "failed")), 1);
  CHECK_INT(num(get(a, "taken_over")) + num(get(b, "taken_over")), 0);
  CHECK_INT(num(get(a, "running")) + num(get(b, "running")), 0);
  CHECK(num(get(a, "last_seen")) > 0);
  /* the rate: oldest first, and the jobs' ends in it */
  const ob_value *rate = get(s, "rate");
  int done_seen = 0, failed_seen = 0;
  for (size_t i = 0; i < ob_array_len(rate); i++) {
    const ob_value *p = ob_array_get(rate, i);
    CHECK(i == 0 || num(get(p, "t")) > num(get(ob_array_get(rate, i - 1), "t")));
    done_seen |= ob_real_value(get(p, "done")) > 0;
    failed_seen |= ob_real_value(get(p, "failed")) > 0;
  }
  CHECK(done_seen && failed_seen);
  ob_unref(s);
}

static int runs_read(void *ud) {
  (void)ud;
  ob_value *runs = ob_ui_fleet_runs(fl);
  int all = ob_array_len(runs) == 7;
  for (size_t i = 0; all && i < ob_array_len(runs); i++)
    all = num(get(ob_array_get(runs, i), "calls")) >= 0;
  ob_unref(runs);
  return all;
}

static int runs_read_pred(const ob_value *s, void *ud) {
  (void)s;
  return runs_read(ud);
}

/* The journal in Redis (a finished job's: from its record, ob_queue_journal.h), as a
 * file, read by ob_trace_build. */
static ob_value *trace_of_copy(const char *id) {
  redisContext *c = redisConnect("127.0.0.1", redis_port);
  ob_queue_journal_args ja;
  ob_queue_journal_args_make(&ja, Q, id);
  redisReply *rp = redisCommandArgv(c, 9, ja.argv, NULL);
  ob_queue_journal_args_free(&ja);
  ob_buf text;
  ob_buf_init(&text);
  ob_error jerr;
  int kind = ob_queue_journal_reply(rp, id, &text, NULL, 0, &jerr);
  char path[256];
  snprintf(path, sizeof path, "%s/copy.jsonl", redis_dir);
  FILE *f = fopen(path, "w");
  if (kind == OB_QJ_TEXT && text.len)
    fwrite(text.data, 1, text.len, f);
  fclose(f);
  ob_buf_free(&text);
  freeReplyObject(rp);
  redisFree(c);
  ob_error err;
  return ob_trace_build(path, OB_TRACE_RUN, NULL, &err);
}

TEST(the_jobs_are_runs_and_their_journals_read_as_files_are) {
  CHECK(until(runs_read_pred, NULL, 30));
  ob_value *runs = ob_ui_fleet_runs(fl);
  char name[64];
  snprintf(name, sizeof name, "job-%s", ids[0]);
  const ob_value *r = find(runs, "id", name);
  snprintf(name, sizeof name, "job:%s", ids[0]);
  CHECK_STR(str(get(r, "source")), name);
  CHECK_STR(str(get(r, "state")), "done");
  CHECK_INT(num(get(r, "calls")), 1);
  CHECK_INT(num(get(r, "failed")), 0);
  CHECK(num(get(r, "started")) > 0 && num(get(r, "ended")) >= num(get(r, "started")));
  snprintf(name, sizeof name, "job-%s", ids[6]);
  r = find(runs, "id", name);
  CHECK_STR(str(get(r, "state")), "failed");
  CHECK_INT(num(get(r, "calls")), 1);
  CHECK_INT(num(get(r, "failed")), 1);
  ob_unref(runs);

  for (int k = 0; k < 2; k++) {
    const char *id = ids[k ? 6 : 0];
    char asked[64];
    snprintf(asked, sizeof asked, k ? "%s" : "job-%s", id); /* both forms */
    ob_error err;
    ob_value *run = ob_ui_fleet_run(fl, asked, &err);
    CHECK(run != NULL);
    CHECK_INT(num(get(run, "exit")), k ? 1 : 0);
    const ob_value *calls = get(run, "calls");
    CHECK_INT(ob_array_len(calls), 1);
    CHECK_STR(str(get(ob_array_get(calls, 0), "state")), k ? "failed" : "done");
    ob_value *file = trace_of_copy(id);
    CHECK(file != NULL);
    if (!run || !file) {
      ob_unref(run);
      ob_unref(file);
      continue;
    }
    char *a = ob_json_print(run, OB_JSON_COMPACT, NULL), *b = ob_json_print(file, OB_JSON_COMPACT, NULL);
    CHECK_STR(a, b);
    free(a);
    free(b);
    ob_unref(run);
    ob_unref(file);
  }
  ob_error err;
  CHECK(ob_ui_fleet_run(fl, "99999", &err) == NULL);
  CHECK_INT(err.code, OB_ENOENT);
  CHECK(ob_ui_fleet_run(fl, "job-../x", &err) == NULL);
  CHECK_INT(err.code, OB_EINVAL);
}

static char shard[1][32];

static int parts_done(const ob_value *s, void *ud) {
  (void)ud;
  char part[48];
  for (int i = 1; i <= 3; i++) {
    snprintf(part, sizeof part, "%s.%d", shard[0], i);
    if (strcmp(str(get(find(get(s, "jobs"), "job", part), "state")), "done"))
      return 0;
  }
  return 1;
}

TEST(a_sharded_job_is_listed_by_its_parts) {
  const char *plan = plan_file("inst.json", "{\"instances\":[\"a\",\"b\",\"c\",\"d\",\"e\"],"
                               "\"context\":[{\"type\":\"data\",\"kind\":\"input\",\"data\":{\"n\":1}}],"
                               "\"plan\":[{\"_tool\":\"step\",\"n\":\"" D "input.n\",\"_outputPath\":\"" D "state.x\"}],"
                               "\"output\":\"" D "state.x\"}");
  char args[300];
  snprintf(args, sizeof args, "%s --shard 2", plan);
  CHECK_INT(submit(args, NULL, shard, 1), 1);
  CHECK(until(parts_done, NULL, 30));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  const ob_value *jobs = get(s, "jobs");
  CHECK(find(jobs, "job", shard[0]) == NULL); /* the whole runs nothing: its parts do */
  char part[48];
  snprintf(part, sizeof part, "%s.3", shard[0]);
  CHECK_STR(str(get(ob_array_get(jobs, 0), "job")), part); /* newest first */
  ob_unref(s);
  ob_error err;
  CHECK(ob_ui_fleet_run(fl, shard[0], &err) == NULL);
  CHECK_INT(err.code, OB_ENOENT);
  CHECK(strstr(err.msg, "sharded") != NULL);
  snprintf(part, sizeof part, "job-%s.2", shard[0]);
  ob_value *run = ob_ui_fleet_run(fl, part, &err);
  CHECK_INT(num(get(run, "exit")), 0);
  CHECK_INT(ob_array_len(get(run, "calls")), 2); /* instances c and d */
  ob_unref(run);
}

typedef struct kill_state {
  const char *victim, *other;
} kill_state;

static int slow_running(const ob_value *s, void *ud) {
  kill_state *k = ud;
  const ob_value *j = find(get(s, "jobs"), "job", slow[0]);
  if (strcmp(str(get(j, "state")), "running"))
    return 0;
  k->victim = !strcmp(str(get(j, "worker")), "wa") ? "wa" : "wb";
  k->other = !strcmp(k->victim, "wa") ? "wb" : "wa";
  return 1;
}

static int taken_over(const ob_value *s, void *ud) {
  kill_state *k = ud;
  const ob_value *v = find(get(s, "workers"), "name", k->victim);
  const ob_value *o = find(get(s, "workers"), "name", k->other);
  const ob_value *j = find(get(s, "jobs"), "job", slow[0]);
  return !strcmp(str(get(v, "state")), "silent") && num(get(o, "taken_over")) == 1 &&
         !strcmp(str(get(j, "state")), "done");
}

TEST(a_killed_worker_goes_silent_and_its_job_is_taken_over) {
  const char *plan = plan_file("slow.json", "[{\"_tool\":\"step\",\"n\":1,\"ms\":3000,"
                                            "\"_outputPath\":\"" D "state.a\"}]");
  CHECK_INT(submit(plan, NULL, slow, 1), 1);
  kill_state k = {0};
  CHECK(until(slow_running, &k, 30));
  if (!k.victim)
    return;
  pid_t victim = !strcmp(k.victim, "wa") ? wa : wb;
  kill(victim, SIGKILL);
  waitpid(victim, NULL, 0);
  if (victim == wa)
    wa = 0;
  else
    wb = 0;
  CHECK(until(taken_over, &k, 60));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  const ob_value *v = find(get(s, "workers"), "name", k.victim);
  CHECK(num(get(v, "last_seen")) > 0);
  CHECK_INT(num(get(v, "running")), 0); /* its job went to the other */
  const ob_value *j = find(get(s, "jobs"), "job", slow[0]);
  CHECK_STR(str(get(j, "worker")), k.other);
  CHECK_INT(num(get(queue0(s), "done")), 10); /* 6, 3 parts, and this one */
  ob_unref(s);
}

static int die_held_by_the_dead(const ob_value *s, void *ud) {
  (void)ud;
  const ob_value *j = find(get(s, "jobs"), "job", die[0]);
  const ob_value *w = find(get(s, "workers"), "name", str(get(j, "worker")));
  return !strcmp(str(get(j, "state")), "running") && !strcmp(str(get(w, "state")), "silent") &&
         num(get(w, "running")) == 1;
}

static int poisoned(const ob_value *s, void *ud) {
  (void)ud;
  /* and wc, killed by it, silent: a second after its last word at most */
  return num(get(queue0(s), "poison")) == 1 && ob_array_len(get(s, "poison")) == 1 &&
         !strcmp(str(get(find(get(s, "workers"), "name", "wc"), "state")), "silent");
}

static pid_t *pid_of(const char *name) {
  return !strcmp(name, "wa") ? &wa : !strcmp(name, "wb") ? &wb : !strcmp(name, "wc") ? &wc : &wd;
}

TEST(a_job_that_kills_its_workers_is_resumable_then_poison) {
  const char *plan = plan_file("die.json", "[{\"_tool\":\"die\",\"_outputPath\":\"" D "state.a\"}]");
  CHECK_INT(submit(plan, NULL, die, 1), 1);
  /* the one live worker takes it and dies: nobody runs it now */
  CHECK(until(die_held_by_the_dead, NULL, 30));
  for (const char *const *n = (const char *const[]){"wa", "wb", NULL}; *n; n++)
    if (*pid_of(*n)) {
      waitpid(*pid_of(*n), NULL, 0);
      *pid_of(*n) = 0;
    }
  run_for_samples(1);
  ob_value *runs = ob_ui_fleet_runs(fl);
  char name[64];
  snprintf(name, sizeof name, "job-%s", die[0]);
  CHECK_STR(str(get(find(runs, "id", name), "state")), "killed-resumable");
  ob_unref(runs);
  /* a second delivery kills wc; the third, to wd, finds it poison (--max-deliveries 2) */
  wc = start_worker("wc");
  waitpid(wc, NULL, 0);
  wc = 0;
  wd = start_worker("wd");
  CHECK(until(poisoned, NULL, 30));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  const ob_value *p = ob_array_get(get(s, "poison"), 0);
  CHECK_STR(str(get(p, "job")), die[0]);
  CHECK_INT(num(get(p, "deliveries")), 3);
  CHECK(!strncmp(str(get(p, "error")), "poison: delivered 2 times", 25));
  const ob_value *j = find(get(s, "jobs"), "job", die[0]);
  CHECK_STR(str(get(j, "state")), "poison");
  CHECK_STR(str(get(j, "worker")), "wd");
  const ob_value *q = queue0(s);
  CHECK_INT(num(get(q, "failed")), 2); /* the failing job, and the poison one */
  CHECK_INT(num(get(q, "running")), 0);
  const ob_value *workers = get(s, "workers");
  CHECK_INT(ob_array_len(workers), 4);
  CHECK_STR(str(get(find(workers, "name", "wd"), "state")), "live");
  CHECK_STR(str(get(find(workers, "name", "wc"), "state")), "silent");
  CHECK_STR(str(get(find(workers, "name", "wa"), "state")), "silent");
  CHECK_STR(str(get(find(workers, "name", "wb"), "state")), "silent");
  ob_unref(s);
}

static int unreachable(const ob_value *s, void *ud) {
  (void)ud;
  return !strncmp(str(get(s, "redis")), "unreachable: ", 13);
}

static int reachable(const ob_value *s, void *ud) {
  (void)ud;
  return !strcmp(str(get(s, "redis")), "ok");
}

static int job_one_failed_on_wd(const ob_value *s, void *ud) {
  (void)ud;
  const ob_value *j = find(get(s, "jobs"), "job", ids[0]);
  return ob_array_len(get(s, "jobs")) == 1 && !strcmp(str(get(j, "state")), "failed") &&
         !strcmp(str(get(j, "worker")), "wd");
}

static int job_one_not_failed(const ob_value *s, void *ud) {
  (void)ud;
  const char *st = str(get(find(get(s, "jobs"), "job", ids[0]), "state"));
  return *st && strcmp(st, "failed");
}

TEST(a_lost_redis_is_a_state_and_a_redis_back_is_ok) {
  kill(redis_pid, SIGKILL);
  waitpid(redis_pid, NULL, 0);
  CHECK(until(unreachable, NULL, 20));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  CHECK_INT(ob_array_len(get(s, "jobs")), 12); /* the last data, kept */
  ob_unref(s);
  ob_error err;
  CHECK(ob_ui_fleet_run(fl, ids[0], &err) == NULL);
  CHECK_INT(err.code, OB_EIO);
  start_redis_again();
  CHECK(until(reachable, NULL, 30));
  s = ob_ui_fleet_snapshot(fl);
  CHECK_INT(num(get(queue0(s), "done")), 0); /* a new, empty Redis */
  ob_unref(s);
  /* the run's connection, made before, is found gone and made again */
  CHECK(ob_ui_fleet_run(fl, ids[0], &err) == NULL);
  CHECK_INT(err.code, OB_ENOENT);
  /* ids are given out from 1 again: job 1 is another job now, not the one done before */
  char again[1][32];
  CHECK_INT(submit(plan_file("fail.json", "[{\"_tool\":\"fail\",\"_outputPath\":\"" D "state.a\"}]"),
                   NULL, again, 1), 1);
  CHECK_STR(again[0], ids[0]);
  CHECK(until(job_one_failed_on_wd, NULL, 30));
  /* and emptied between two samples (the loop does not run here), job 1 given out again
     at once: read again, not taken for the one that failed */
  redisContext *c = redisConnect("127.0.0.1", redis_port);
  freeReplyObject(redisCommand(c, "FLUSHALL"));
  redisFree(c);
  char batch[256];
  snprintf(batch, sizeof batch, "%s/one.jsonl", redis_dir);
  write_file(batch, "{\"n\":1}\n");
  CHECK_INT(submit(plan_file("step.json", "{\"plan\":[{\"_tool\":\"step\",\"n\":\"" D "input.n\","
                                          "\"_outputPath\":\"" D "state.a\"}],\"output\":\"" D "state.a\"}"),
                   batch, again, 1), 1);
  CHECK_STR(again[0], ids[0]);
  CHECK(until(job_one_not_failed, NULL, 30));
}

TEST(a_redis_that_stops_answering_is_a_state_not_a_hang) {
  kill(redis_pid, SIGSTOP);
  CHECK(until(unreachable, NULL, 30));
  ob_value *s = ob_ui_fleet_snapshot(fl);
  CHECK(strstr(str(get(s, "redis")), "did not answer") != NULL);
  ob_unref(s);
  ob_error err;
  CHECK(ob_ui_fleet_run(fl, ids[0], &err) == NULL);
  CHECK_INT(err.code, OB_EIO);
  kill(redis_pid, SIGCONT);
  CHECK(until(reachable, NULL, 30));
}

TEST(an_unreachable_redis_from_the_start_and_bad_arguments) {
  uv_loop_t l2;
  uv_loop_init(&l2);
  ob_error err;
  CHECK(ob_ui_fleet_new(&l2, "ftp://x", NULL, &err) == NULL);
  CHECK_INT(err.code, OB_EINVAL);
  CHECK(ob_ui_fleet_new(&l2, redis_url, "no/such", &err) == NULL);
  CHECK_INT(err.code, OB_EINVAL);
  char closed[64];
  snprintf(closed, sizeof closed, "redis://127.0.0.1:%d", free_port());
  ob_ui_fleet *f = ob_ui_fleet_new(&l2, closed, NULL, &err);
  CHECK(f != NULL);
  for (int i = 0; i < 3; i++)
    uv_run(&l2, UV_RUN_ONCE);
  ob_value *s = ob_ui_fleet_snapshot(f);
  CHECK(!strncmp(str(get(s, "redis")), "unreachable: ", 13));
  CHECK_STR(str(get(s, "queue")), "obelus");
  CHECK(is_null(get(s, "sampled")));
  CHECK_INT(ob_array_len(get(s, "workers")), 0);
  CHECK_INT(ob_array_len(get(s, "rate")), 0);
  ob_unref(s);
  CHECK(ob_ui_fleet_run(f, "1", &err) == NULL);
  CHECK_INT(err.code, OB_EIO);
  ob_ui_fleet_close(f);
  while (uv_run(&l2, UV_RUN_NOWAIT))
    ;
  ob_ui_fleet_free(f);
  CHECK_INT(uv_loop_close(&l2), 0);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  setup();
  if (!*redis_url) {
    printf("# 0 passed, 1 failed\n");
    return 1;
  }
  uv_loop_init(&loop);
  ob_error err;
  fl = ob_ui_fleet_new(&loop, redis_url, Q, &err);
  if (!fl) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  RUN(an_empty_queue_is_sampled);
  RUN(two_workers_jobs_done_and_failed_are_counted_and_listed);
  RUN(the_jobs_are_runs_and_their_journals_read_as_files_are);
  RUN(a_sharded_job_is_listed_by_its_parts);
  RUN(a_killed_worker_goes_silent_and_its_job_is_taken_over);
  RUN(a_job_that_kills_its_workers_is_resumable_then_poison);
  RUN(a_lost_redis_is_a_state_and_a_redis_back_is_ok);
  RUN(a_redis_that_stops_answering_is_a_state_not_a_hang);
  RUN(an_unreachable_redis_from_the_start_and_bad_arguments);
  pid_t all[] = {wa, wb, wc, wd};
  for (size_t i = 0; i < 4; i++)
    if (all[i] > 0) {
      kill(all[i], SIGKILL);
      waitpid(all[i], NULL, 0);
    }
  ob_ui_fleet_close(fl);
  while (uv_run(&loop, UV_RUN_NOWAIT))
    ;
  ob_ui_fleet_free(fl);
  int closed = uv_loop_close(&loop);
  stop_redis();
  if (closed != 0) {
    printf("not ok - the loop closes (handles left)\n");
    test_failed_++;
  }
  return TEST_END();
}
