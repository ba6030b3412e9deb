/* game_loop.c -- an example host: a game's fixed-timestep loop (60 ticks/s) that
 * advances obelus once a frame while a plan of NPC actions plays out.
 *
 * A game cannot hand its thread to anyone: every 16.7 ms it must simulate and draw
 * a frame. So the engine runs on the game's own libuv loop, and the game advances
 * it with one uv_run(loop, UV_RUN_NOWAIT) per frame: whatever timers are due fire,
 * the tools they wake run up to their next wait, and control comes straight back.
 * The NPC tools never block: the Lua ones (examples/game_loop.lua) wait with
 * obelus.sleep, and `craft`, written in C here, completes from a uv timer.
 *
 * The host measures the engine's share of every frame (wall time, and this
 * thread's CPU time) and exits 1 if any frame spent more than 2 ms on engine work,
 * or if the plan did not end with the expected result. A frame in which the OS
 * took the thread off the CPU (an involuntary context switch: the machine is busy
 * with other work; or a voluntary one: blocked in the kernel, as on a page of the
 * program read from a busy disk the first time it runs) is judged by its CPU time,
 * since its wall time then measures the machine, not the engine.
 *
 * Usage: game_loop [TOOLS.lua]   (default: examples/game_loop.lua)
 * Uses only the public API, <obelus.h>. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RUSAGE_THREAD, clock_nanosleep; and uv.h needs POSIX types */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <obelus.h>

#define TICKS_PER_S 60
#define TICK_NS (1000000000ull / TICKS_PER_S)
#define BUDGET_NS 2000000ull          /* the most engine work a frame may hold */
#define MAX_FRAMES (10 * TICKS_PER_S) /* the plan takes ~1 s; not done in 10 s is stuck */
#define CROWD 24                      /* villagers wandering about, one call each: enough to load frame 0,
                                         few enough to keep a slow CI host under budget */

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The times the OS took this thread off the CPU: preempted (involuntary), or blocked in
 * the kernel (voluntary: a page of the program read from a busy disk, say). Either way
 * the wall time of the frame is not the engine's work: its CPU time is. */
static long os_switches(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw + ru.ru_nvcsw;
}

/* ---- the game: a world that ticks at a fixed rate ---- */

typedef struct world {
  uint64_t ticks;      /* simulation steps taken */
  double day;          /* game time in seconds: what the fixed step advances */
  int npc_done;        /* NPC actions finished (told by the engine's events) */
  int npc_failed;
  int run_status;      /* the run's status once done; -1 before */
  char *story;         /* the run's output, once done */
} world;

static void world_tick(world *w) {
  w->ticks++;
  w->day += 1.0 / TICKS_PER_S; /* fixed dt: the simulation never sees frame jitter */
}

/* ---- `craft`: an NPC tool written in C, done when a uv timer fires ---- */

typedef struct craft_job {
  uv_timer_t timer;
  obelus_call *call;
  char result[160];
} craft_job;

/* Reads "key":<integer> or "key":"<string>" out of a call's params. The params are
 * flat and `craft`'s schema pins their types and the strings' characters (no quote,
 * no backslash), so this suffices here; a host with richer params would use a JSON
 * library (obelus.h hands JSON over as text). */
static const char *param(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? p + strlen(pat) : NULL;
}

static void job_closed(uv_handle_t *h) { free(h->data); }

static void craft_ready(uv_timer_t *t) {
  craft_job *job = t->data;
  obelus_call_complete(job->call, job->result);
  uv_close((uv_handle_t *)t, job_closed);
}

static void craft(obelus_call *call, const char *params, void *data) {
  uv_loop_t *loop = data;
  const char *npc = param(params, "npc"), *item = param(params, "item"),
             *ms = param(params, "ms");
  craft_job *job = malloc(sizeof *job);
  if (!npc || !item || !ms || !job) {
    free(job);
    obelus_call_fail(call, "craft needs npc, item and ms");
    return;
  }
  /* npc and item point at "..." (quotes included): copied as JSON strings */
  snprintf(job->result, sizeof job->result, "{\"npc\":%.*s,\"item\":%.*s}",
           (int)(strchr(npc + 1, '"') - npc + 1), npc, (int)(strchr(item + 1, '"') - item + 1),
           item);
  job->call = call;
  uv_timer_init(loop, &job->timer);
  job->timer.data = job;
  uv_timer_start(&job->timer, craft_ready, strtoull(ms, NULL, 10), 0);
}

static const char craft_schema[] =
    "{\"type\":\"object\",\"required\":[\"npc\",\"item\",\"ms\"],\"properties\":{"
    "\"npc\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},"
    "\"item\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},"
    "\"ms\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60000}}}";

/* ---- the plan: a day in the village ---- */

/* Three NPCs walk their rounds (Lua, obelus.sleep), the smith and the baker craft
 * (C, uv timers), the guard haggles for the sword where its patrol ended, and the
 * feast waits for all of them and for a crowd of CROWD wandering villagers. */
static char *village_plan(void) {
  static const char head[] =
      "{\"plan\":["
      "{\"_id\":\"guard\",\"_tool\":\"patrol\",\"npc\":\"guard\",\"stepMs\":60,"
      "\"waypoints\":[\"gate\",\"tower\",\"well\",\"gate\"],\"_outputPath\":\"†state.guard\"},"
      "{\"_id\":\"watch\",\"_tool\":\"patrol\",\"npc\":\"watch\",\"stepMs\":45,"
      "\"waypoints\":[\"wall\",\"tower\",\"wall\",\"tower\",\"wall\"],\"_outputPath\":\"†state.watch\"},"
      "{\"_id\":\"shepherd\",\"_tool\":\"patrol\",\"npc\":\"shepherd\",\"stepMs\":70,"
      "\"waypoints\":[\"meadow\",\"brook\",\"hill\",\"brook\",\"meadow\",\"hill\",\"ridge\","
      "\"hill\",\"brook\",\"meadow\",\"fold\",\"barn\"],\"_outputPath\":\"†state.shepherd\"},"
      "{\"_id\":\"smith\",\"_tool\":\"craft\",\"npc\":\"smith\",\"item\":\"sword\",\"ms\":300,"
      "\"_outputPath\":\"†state.forge\"},"
      "{\"_id\":\"baker\",\"_tool\":\"craft\",\"npc\":\"baker\",\"item\":\"bread\",\"ms\":200,"
      "\"_outputPath\":\"†state.oven\"},"
      "{\"_id\":\"deal\",\"_tool\":\"haggle\",\"buyer\":\"†state.guard\",\"goods\":\"†state.forge\","
      "\"rounds\":3,\"_outputPath\":\"†state.deal\"},"
      "{\"_id\":\"feast\",\"_tool\":\"feast\",\"bread\":\"†state.oven\",\"deal\":\"†state.deal\","
      "\"crowd\":\"†state.crowd\","
      "\"guests\":[\"†state.guard\",\"†state.watch\",\"†state.shepherd\"],\"_outputPath\":\"†state.feast\"}";
  size_t cap = sizeof head + CROWD * 160 + 64, len = strlen(head);
  char *plan = malloc(cap);
  if (!plan)
    return NULL;
  memcpy(plan, head, len);
  for (int i = 0; i < CROWD; i++) /* each wanders a different while, then joins the crowd */
    len += (size_t)snprintf(plan + len, cap - len,
                            ",{\"_id\":\"villager%d\",\"_tool\":\"patrol\",\"npc\":\"villager%d\","
                            "\"stepMs\":%d,\"waypoints\":[\"square\",\"market\"],"
                            "\"_outputPath\":\"†state.crowd\",\"_outputMethod\":\"push\"}",
                            i, i, 20 + (i * 37) % 300);
  snprintf(plan + len, cap - len, "],\"output\":\"†state.feast\"}");
  return plan;
}

/* ---- the engine's callbacks (from the loop, inside the frame's uv_run) ---- */

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  world *w = data;
  (void)run;
  if (ev->type == OBELUS_EVENT_DONE)
    w->npc_done++;
  else if (ev->type == OBELUS_EVENT_FAILED || ev->type == OBELUS_EVENT_SKIPPED) {
    w->npc_failed++;
    fprintf(stderr, "game_loop: %s %s: %s\n", ev->call_id, obelus_event_name(ev->type),
            ev->reason ? ev->reason : "");
  }
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  world *w = data;
  (void)run;
  w->run_status = status;
  w->story = strdup(output);
}

/* The value at expr as JSON text equals want. */
static int expect(obelus_run *run, const char *expr, const char *want) {
  char *got = NULL;
  int rc = obelus_run_resolve(run, expr, NULL, OBELUS_NOW, &got);
  int ok = rc == OBELUS_OK && !strcmp(got, want);
  if (!ok)
    fprintf(stderr, "game_loop: %s is %s, expected %s\n", expr,
            rc == OBELUS_OK ? got : obelus_strerror(rc), want);
  free(got);
  return ok;
}

int main(int argc, char **argv) {
  const char *tools = argc > 1 ? argv[1] : "examples/game_loop.lua";
  uv_loop_t loop;
  uv_loop_init(&loop);
  world w = {.run_status = -1};

  /* Loading: before the first frame, as a game loads a level. */
  obelus_engine *e;
  if (obelus_engine_new(&e, &loop) < 0) {
    fprintf(stderr, "game_loop: no engine\n");
    return 2;
  }
  char *plan = village_plan();
  obelus_run_options opt = {.name = "village", .on_event = on_event, .on_done = on_done, .data = &w};
  obelus_run *run = NULL;
  if (obelus_engine_load_tools(e, tools) < 0 ||
      obelus_engine_add_tool(e, "craft", craft_schema, craft, &loop) < 0 || !plan ||
      obelus_run_new(e, &run, plan, &opt) < 0) {
    fprintf(stderr, "game_loop: %s\n", plan ? obelus_engine_errmsg(e) : "out of memory");
    free(plan);
    obelus_engine_free(e);
    return 2;
  }
  free(plan);

  /* The frames. Frame 0 starts the run (its first calls start there, so the
   * start is measured like any other engine work). */
  uint64_t worst_wall = 0, worst_cpu = 0, total_wall = 0, frames = 0, over = 0, preempted = 0;
  uint64_t worst_frame = 0, worst_later = 0; /* worst_later: after frame 0, which starts the run */
  uint64_t t_begin = clock_ns(CLOCK_MONOTONIC), acc = 0, prev = t_begin;
  while (w.run_status < 0 && frames < MAX_FRAMES) {
    uint64_t frame_start = clock_ns(CLOCK_MONOTONIC);
    acc += frame_start - prev; /* the simulation catches up in fixed steps */
    prev = frame_start;
    while (acc >= TICK_NS) {
      world_tick(&w);
      acc -= TICK_NS;
    }

    long sw0 = os_switches();
    uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
    if (frames == 0)
      obelus_run_start(run);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (w.run_status < 0 && !uv_loop_alive(&loop))
      obelus_run_fail_stalled(run); /* nothing left that could wake the waiting calls */
    uint64_t wall = clock_ns(CLOCK_MONOTONIC) - t0, cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    int was_preempted = os_switches() != sw0;

    /* blocked on engine work: the wall time, unless the OS had the thread off the CPU */
    uint64_t engine = was_preempted ? cpu : wall;
    preempted += was_preempted && wall > BUDGET_NS;
    over += engine > BUDGET_NS;
    if (wall > worst_wall) {
      worst_wall = wall;
      worst_frame = frames;
    }
    if (cpu > worst_cpu)
      worst_cpu = cpu;
    if (frames > 0 && wall > worst_later)
      worst_later = wall;
    total_wall += wall;
    frames++;

    /* (drawing would happen here) then wait for the next frame's slot */
    struct timespec next;
    uint64_t due = t_begin + frames * TICK_NS;
    next.tv_sec = (time_t)(due / 1000000000ull);
    next.tv_nsec = (long)(due % 1000000000ull);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  /* up to the last frame's start, where the ticks were last caught up: the sleep after
     the last frame (late by however long the OS takes to wake a busy machine) had no
     frame to tick in */
  double seconds = (double)(prev - t_begin) / 1e9;

  int ok = w.run_status == 0;
  if (!ok)
    fprintf(stderr, "game_loop: the run %s\n",
            w.run_status < 0 ? "did not finish in time" : "had failed calls");
  ok &= expect(run, "†state.feast.deal", "\"guard buys the smith's sword at the gate for 70 gold\"");
  ok &= expect(run, "†state.feast.guests", "[\"guard\",\"shepherd\",\"watch\"]");
  ok &= expect(run, "†state.feast.bread", "\"bread\"");
  ok &= expect(run, "†state.feast.crowd", "24");
  if (w.npc_done != CROWD + 7 || w.npc_failed) {
    fprintf(stderr, "game_loop: %d calls done, %d failed or skipped; expected %d done\n",
            w.npc_done, w.npc_failed, CROWD + 7);
    ok = 0;
  }
  /* the fixed step kept pace with the clock (within two ticks) */
  double expected_ticks = seconds * TICKS_PER_S;
  if ((double)w.ticks < expected_ticks - 2 || (double)w.ticks > expected_ticks + 2) {
    fprintf(stderr, "game_loop: %llu ticks in %.3f s\n", (unsigned long long)w.ticks, seconds);
    ok = 0;
  }

  printf("game_loop: %llu frames, %llu ticks in %.3f s; %d NPC calls done\n",
         (unsigned long long)frames, (unsigned long long)w.ticks, seconds, w.npc_done);
  printf("game_loop: output %s\n", w.story ? w.story : "(none)");
  printf("game_loop: engine work per frame: mean %.3f ms, worst %.3f ms wall (frame %llu), "
         "worst %.3f ms CPU, worst after the start %.3f ms; budget %.1f ms\n",
         frames ? (double)total_wall / (double)frames / 1e6 : 0.0, (double)worst_wall / 1e6,
         (unsigned long long)worst_frame, (double)worst_cpu / 1e6, (double)worst_later / 1e6,
         (double)BUDGET_NS / 1e6);
  if (preempted)
    printf("game_loop: %llu frame(s) over budget in wall time only while the OS had the "
           "thread off the CPU (judged by CPU time)\n",
           (unsigned long long)preempted);
  if (over) {
    fprintf(stderr, "game_loop: %llu frame(s) blocked more than %.1f ms on engine work\n",
            (unsigned long long)over, (double)BUDGET_NS / 1e6);
    ok = 0;
  }

  obelus_run_free(run);
  obelus_engine_free(e);
  uv_run(&loop, UV_RUN_NOWAIT); /* the engine's closed handles are released */
  if (uv_loop_close(&loop) != 0) {
    fprintf(stderr, "game_loop: handles left open on the loop\n");
    ok = 0;
  }
  free(w.story);
  printf("game_loop: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
