/* bench_engine.c -- whole-engine benchmarks (plans run on the loop) and the bare Lua
 * floor they are compared against, one JSON line each.
 *   obelus-bench chain N       N calls, call i reads †state.c<i-1>, writes †state.c<i>
 *   obelus-bench fanout N      one source, N readers of it writing †state.out.w<i>, a join
 *   obelus-bench each N        one call mapped over an input list of N numbers (_each): N
 *                              copies of inc made at run time, gathered at †state.out, a join
 *   obelus-bench sleep N MS    N calls that obelus.sleep(MS), then a join of their outputs
 *   obelus-bench instances N K a plan of a K-call chain run for N instances ("instances")
 *   obelus-bench chains N K    the same N*K calls without instances: N chains of K calls
 *                              writing †state.i<n>.c<k> (what instances are compared to)
 *   obelus-bench floor N       the chain's tool function resumed N times, each in a fresh
 *                              coroutine, with no engine around it
 *   obelus-bench onekey N      N calls that each read one key of a 150,000-key input
 *                              document (~10 MB of JSON) and return what they read: what
 *                              a call costs that needs a little of a big value (views)
 *   obelus-bench compute N     one call of a tool that adds N numbers, timed in a run and
 *                              bare (the same function in a coroutine, no engine): what the
 *                              engine costs a tool that computes rather than waits
 * Only the run is timed (ob_run_start until the last awaited call settles): building the
 * plan, checking it and loading the tools are not. calls_per_s counts every call of the
 * plan (fanout N+2, sleep N+1); sleep's loop_ms runs from ob_run_start to the join's
 * completion (the run's on_done: the join is its last awaited call). No event listener is
 * registered unless OBELUS_BENCH_VERBOSE is set (the CLI's costs one clock read an event). The result is checked after the clock stops (a wrong one: exit 1). The
 * tools are written to a temporary folder so that the binary works from any directory.
 *   OBELUS_BENCH_VERBOSE=1     the run's phases on stderr (when the start cascade ended...)
 *                              and the process's memory at each stage (RSS, malloc, Lua)
 *   OBELUS_BENCH_ALLOCS=1      the Lua blocks made while the run starts (ob_run_start) and
 *                              still live after it, by kind and size, per call, and the
 *                              blocks of one call in order; the C heap's growth per call
 *   OBELUS_BENCH_WHOLE=1       the plan's reading and check are timed too (each reads its
 *                              copies as a plan while it runs: compared with fanout so)
 *   OBELUS_BENCH_JOURNAL=MODE  chain, fanout: the run writes a journal (never, batch or
 *                              always, as --fsync) to obelus-bench-<pid>.jsonl in the current
 *                              folder (a real disk, not a tmpfs), removed after; the timed
 *                              part then ends when the journal is closed (its last fsync)
 *   OBELUS_BENCH_PERF_CTL/ACK  perf's control fifos: profile the timed part only (below) */
#include <lauxlib.h>
#include <lualib.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/ob_engine.h"
#include "bridge/ob_pool.h"
#include "engine/ob_run.h"
#include "log/ob_wal.h"

int ob_bench_engine(const char *mode, size_t n, size_t ms);
int ob_bench_floor(size_t n);
int ob_bench_onekey(size_t n);

/* The trivial tool: its input + 1. The floor resumes this very function. */
static const char inc_lua[] = "return { name = \"inc\", run = function(call, ctx)\n"
                              "  return call.x + 1\n"
                              "end }\n";
/* The join: counts what it was given, so that it reads the whole object. */
static const char join_lua[] = "return { name = \"join\", run = function(call, ctx)\n"
                               "  local n = 0\n"
                               "  for _ in pairs(call.all) do n = n + 1 end\n"
                               "  return n\n"
                               "end }\n";
/* A tool that computes: its speed is the Lua VM's, unless the engine slows the VM down. */
static const char sum_lua[] = "return { name = \"sum\", run = function(call, ctx)\n"
                              "  local s = 0\n"
                              "  for i = 1, call.n do s = s + i % 7 end\n"
                              "  return s\n"
                              "end }\n";
/* One key of a big document: the record's id. */
static const char pick_lua[] = "return { name = \"pick\", run = function(call, ctx)\n"
                               "  return call.doc[call.key].id\n"
                               "end }\n";
static const char nap_lua[] = "local obelus = require \"obelus\"\n"
                              "return { name = \"nap\", run = function(call, ctx)\n"
                              "  obelus.sleep(call.ms)\n"
                              "  return 1\n"
                              "end }\n";

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* OBELUS_BENCH_VERBOSE: the process's memory at a stage of the run, on stderr. */
static void mem_note(const char *mode, const char *stage, ob_engine *e) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    fclose(f);
  }
  struct mallinfo2 mi = mallinfo2();
  fprintf(stderr, "%s: %s: RSS %ld KB (peak %ld KB), malloc %zu KB + %zu KB mapped",
          mode, stage, resident * (sysconf(_SC_PAGESIZE) / 1024), peak_rss_kb(),
          mi.uordblks / 1024, mi.hblkhd / 1024);
  if (e)
    fprintf(stderr, ", Lua %d KB", lua_gc(e->L, LUA_GCCOUNT));
  fputc('\n', stderr);
}

/* --- the tools, in a temporary folder ------------------------------------------ */

static char tool_dir[64];
static const char *const tool_files[] = {"inc.lua", "join.lua", "nap.lua", "sum.lua", "pick.lua"};

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tool_dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) == EOF || fclose(f) != 0) {
    fprintf(stderr, "obelus-bench: cannot write %s\n", path);
    exit(2);
  }
}

static void make_tools(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(tool_dir, sizeof tool_dir, "%s/obelus-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (strlen(tool_dir) >= sizeof tool_dir - 1 || !mkdtemp(tool_dir)) {
    fprintf(stderr, "obelus-bench: cannot make a temporary folder\n");
    exit(2);
  }
  write_file(tool_files[0], inc_lua);
  write_file(tool_files[1], join_lua);
  write_file(tool_files[2], nap_lua);
  write_file(tool_files[3], sum_lua);
  write_file(tool_files[4], pick_lua);
}

static void remove_tools(void) {
  char path[128];
  for (size_t i = 0; i < sizeof tool_files / sizeof *tool_files; i++) {
    snprintf(path, sizeof path, "%s/%s", tool_dir, tool_files[i]);
    unlink(path);
  }
  rmdir(tool_dir);
}

/* An engine with the bench's tools loaded (NULL, said on stderr, when it cannot start). */
static ob_engine *engine_with_tools(void) {
  ob_error err;
  make_tools();
  ob_engine *e = ob_engine_new(NULL, &err);
  if (e && ob_engine_load_tools(e, tool_dir, &err) != OB_OK) {
    ob_engine_free(e);
    e = NULL;
  }
  if (!e)
    fprintf(stderr, "obelus-bench: %s\n", err.msg);
  remove_tools();
  return e;
}

/* --- the plans ------------------------------------------------------------------- */

/* The keys of the calls, made once and shared by every call, as a plan read from JSON
 * shares them (ob_json interns a document's keys). */
static ob_value *key_tool, *key_out, *key_x, *key_ms, *key_all;

static void make_keys(void) {
  key_tool = ob_cstring("_tool");
  key_out = ob_cstring("_outputPath");
  key_x = ob_cstring("x");
  key_ms = ob_cstring("ms");
  key_all = ob_cstring("all");
}

static void free_keys(void) {
  ob_unref(key_tool);
  ob_unref(key_out);
  ob_unref(key_x);
  ob_unref(key_ms);
  ob_unref(key_all);
}

/* {"_tool": tool, <param>: <value>, "_outputPath": "†state.<out>"} */
static ob_value *call(const char *tool, ob_value *param, ob_value *value, const char *out) {
  char path[64];
  snprintf(path, sizeof path, OB_DAGGER "state.%s", out);
  ob_value *c = ob_object();
  c = ob_object_setv(c, key_tool, ob_cstring(tool));
  c = ob_object_setv(c, param, value);
  return ob_object_setv(c, key_out, ob_cstring(path));
}

static ob_value *ref(const char *kind_path) {
  char text[80];
  snprintf(text, sizeof text, OB_DAGGER "%s", kind_path);
  return ob_cstring(text);
}

static ob_value *chain_plan(size_t n) {
  ob_value *plan = ob_array();
  char in[32], out[32];
  for (size_t i = 0; i < n; i++) {
    if (i == 0)
      snprintf(in, sizeof in, "input.x");
    else
      snprintf(in, sizeof in, "state.c%zu", i - 1);
    snprintf(out, sizeof out, "c%zu", i);
    plan = ob_array_push(plan, call("inc", key_x, ref(in), out));
  }
  return plan;
}

static ob_value *fanout_plan(size_t n) {
  ob_value *plan = ob_array();
  char out[32];
  plan = ob_array_push(plan, call("inc", key_x, ref("input.x"), "src"));
  for (size_t i = 0; i < n; i++) {
    snprintf(out, sizeof out, "out.w%zu", i);
    plan = ob_array_push(plan, call("inc", key_x, ref("state.src"), out));
  }
  return ob_array_push(plan, call("join", key_all, ref("state.out"), "result"));
}

/* One call mapped over the input's list of n numbers (_each), then the join: the same
 * n calls of inc as fanout's, made at run time from a list. */
static ob_value *each_plan(void) {
  ob_value *plan = ob_array();
  ob_value *c = call("inc", key_x, ob_cstring("\xE2\x80\xA0" "each.value"), "out");
  c = ob_object_set(c, "_each", 5, ref("input.list"));
  plan = ob_array_push(plan, c);
  return ob_array_push(plan, call("join", key_all, ref("state.out"), "result"));
}

static ob_value *sleep_plan(size_t n, size_t ms) {
  ob_value *plan = ob_array();
  char out[32];
  for (size_t i = 0; i < n; i++) {
    snprintf(out, sizeof out, "naps.w%zu", i);
    plan = ob_array_push(plan, call("nap", key_ms, ob_int((int64_t)ms), out));
  }
  return ob_array_push(plan, call("join", key_all, ref("state.naps"), "result"));
}

/* One chain of k calls for each of n instances: {"instances": [...], "plan": [...]} */
static ob_value *instances_plan(size_t n, size_t k) {
  ob_value *plan = chain_plan(k), *ids = ob_array();
  char id[32];
  for (size_t i = 0; i < n; i++) {
    snprintf(id, sizeof id, "i%zu", i);
    ids = ob_array_push(ids, ob_cstring(id));
  }
  return ob_object_set(ob_object_set(ob_object(), "instances", 9, ids), "plan", 4, plan);
}

/* The same calls without instances: chain n writes state.i<n>.c<0..k-1>. */
static ob_value *chains_plan(size_t n, size_t k) {
  ob_value *plan = ob_array();
  char in[64], out[64];
  for (size_t c = 0; c < n; c++)
    for (size_t i = 0; i < k; i++) {
      if (i == 0)
        snprintf(in, sizeof in, "input.x");
      else
        snprintf(in, sizeof in, "state.i%zu.c%zu", c, i - 1);
      snprintf(out, sizeof out, "i%zu.c%zu", c, i);
      plan = ob_array_push(plan, call("inc", key_x, ref(in), out));
    }
  return plan;
}

/* The value a run left at state.<path> (in instance inst) is the integer want? Not timed. */
static int check_result_in(ob_run *run, const char *inst, const char *path, int64_t want) {
  ob_path p;
  ob_error err;
  if (ob_path_parse(path, strlen(path), &p, &err) != OB_OK)
    return 0;
  ob_value *v = ob_log_read(ob_run_log(run), "state", inst, &p, OB_LOG_NOW);
  int ok = v && ob_typeof(v) == OB_INT && ob_int_value(v) == want;
  if (!ok)
    fprintf(stderr, "obelus-bench: state.%s is not %lld\n", path, (long long)want);
  ob_unref(v);
  ob_path_free(&p);
  return ok;
}

/* The value a run left at state.<path> is the integer want? Not timed. */
static int check_result(ob_run *run, const char *path, int64_t want) {
  return check_result_in(run, NULL, path, want);
}

/* perf record --control=fifo:CTL,ACK -D -1 ... with OBELUS_BENCH_PERF_CTL=CTL and
 * OBELUS_BENCH_PERF_ACK=ACK profiles the timed part only. */
static void perf_control(const char *cmd) {
  const char *ctl = getenv("OBELUS_BENCH_PERF_CTL"), *ack = getenv("OBELUS_BENCH_PERF_ACK");
  if (!ctl)
    return;
  FILE *f = fopen(ctl, "w");
  if (f) {
    fprintf(f, "%s\n", cmd);
    fclose(f);
  }
  char buf[16];
  FILE *a = ack ? fopen(ack, "r") : NULL;
  if (a) {
    if (!fgets(buf, sizeof buf, a))
      buf[0] = 0;
    fclose(a);
  }
}


/* --- OBELUS_BENCH_ALLOCS: Lua's blocks counted while the run starts ------------------ */

/* Lua's allocator wrapped: every block made between census_start and census_stop is
 * remembered by address with the kind Lua told (a new object's osize is its type) and
 * its size, so that what is still live at the end is counted by (kind, size); and the
 * blocks of one call in the middle (between the n/2-th and the next new thread) are
 * listed in order. Not timed: the wrapper is slow. */
typedef struct census_row {
  int tag;
  size_t size;
  long live;
} census_row;

typedef struct census {
  lua_Alloc f;
  void *ud;
  int on;
  void **keys;          /* open addressing: block -> row + 1 in vals */
  int *vals;
  size_t cap, used;
  census_row rows[512];
  int nrows;
  long threads;         /* new threads seen */
  long trace_from;      /* list the blocks made while threads == trace_from */
  int trace_tag[64];
  size_t trace_osize[64], trace_nsize[64];
  int ntrace;
  long freed_older;     /* bytes freed of blocks made before the census */
  long grown_older;     /* bytes grown of blocks made before the census */
  size_t c_heap;        /* malloc's bytes in use when it started */
  size_t slabs;         /* the pool's slabs then */
} census;

static size_t census_slot(census *c, void *p) {
  size_t h = ((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15u;
  size_t i = h & (c->cap - 1);
  while (c->keys[i] && c->keys[i] != p)
    i = (i + 1) & (c->cap - 1);
  return i;
}

/* Rebuilds the table with room for cap blocks (taken-out ones are left behind). */
static void census_grow(census *c, size_t cap) {
  void **ok = c->keys;
  int *ov = c->vals;
  size_t ocap = c->cap;
  c->cap = cap;
  c->keys = calloc(c->cap, sizeof *c->keys);
  c->vals = calloc(c->cap, sizeof *c->vals);
  if (!c->keys || !c->vals)
    abort();
  c->used = 0;
  for (size_t i = 0; i < ocap; i++)
    if (ok[i] && ov[i] > 0) {
      size_t j = census_slot(c, ok[i]);
      c->keys[j] = ok[i];
      c->vals[j] = ov[i];
      c->used++;
    }
  free(ok);
  free(ov);
}

static void census_put(census *c, void *p, int row) {
  if (2 * (c->used + 1) > c->cap)
    census_grow(c, c->cap ? 2 * c->cap : 1 << 16);
  size_t i = census_slot(c, p);
  if (!c->keys[i])
    c->used++;
  c->keys[i] = p;
  c->vals[i] = row + 1;
}

/* The row of a block made now, or -1 (tag, size) when the census is full. */
static int census_row_of(census *c, int tag, size_t size) {
  for (int i = 0; i < c->nrows; i++)
    if (c->rows[i].tag == tag && c->rows[i].size == size)
      return i;
  if (c->nrows == (int)(sizeof c->rows / sizeof *c->rows))
    return -1;
  c->rows[c->nrows] = (census_row){tag, size, 0};
  return c->nrows++;
}

/* The row a block was counted in (taken out), or -1 when it was made before. */
static int census_take(census *c, void *p) {
  if (!c->cap)
    return -1;
  size_t i = census_slot(c, p);
  if (!c->keys[i] || c->vals[i] <= 0)
    return -1;
  int row = c->vals[i] - 1;
  c->vals[i] = -1; /* a tombstone: probing goes on past it */
  return row;
}

static void *census_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  census *c = ud;
  void *b = c->f(c->ud, ptr, osize, nsize);
  if (!c->on || (nsize && !b))
    return b;
  int tag = 0;
  if (!ptr) {
    tag = (int)osize; /* a new object: its type */
  } else {
    int row = census_take(c, ptr);
    if (row >= 0) {
      c->rows[row].live--;
      tag = c->rows[row].tag;
    } else if (nsize) {
      c->grown_older += (long)nsize - (long)osize;
      return b;
    } else {
      c->freed_older += (long)osize;
      return b;
    }
  }
  if (!nsize)
    return b;
  if (!ptr && tag == LUA_TTHREAD)
    c->threads++;
  if (c->threads == c->trace_from && c->ntrace < 64) {
    c->trace_tag[c->ntrace] = tag;
    c->trace_osize[c->ntrace] = ptr ? osize : 0;
    c->trace_nsize[c->ntrace++] = nsize;
  }
  int row = census_row_of(c, tag, nsize);
  if (row >= 0) {
    c->rows[row].live++;
    census_put(c, b, row);
  }
  return b;
}

static const char *census_kind(int tag) {
  switch (tag) {
  case 0: return "vector (stack, CallInfo, a table's parts)";
  case LUA_TSTRING: return "short string";
  case LUA_TSTRING | (1 << 4): return "long string";
  case LUA_TTABLE: return "table";
  case LUA_TFUNCTION: return "Lua closure";
  case LUA_TFUNCTION | (2 << 4): return "C closure";
  case LUA_TUSERDATA: return "full userdata";
  case LUA_TTHREAD: return "thread (lua_State)";
  case LUA_NUMTYPES: return "upvalue";
  case LUA_NUMTYPES + 1: return "prototype";
  default: return "other";
  }
}

/* What a block of size takes in the engine's pool (ob_pool.h: 16-byte classes up to 1 KB). */
static size_t census_block(size_t size) {
  return size <= OB_POOL_SMALL ? (size + 15) & ~(size_t)15 : size;
}

static size_t c_heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/* The pool's slabs come from malloc until it holds 4 MB (ob_pool.c), then from mmap. */
static size_t malloc_slabs(size_t slab_bytes) {
  size_t first = (size_t)4 << 20;
  return slab_bytes < first ? slab_bytes : first;
}

static void census_start(census *c, ob_engine *e, size_t n) {
  lua_State *L = e->L;
  memset(c, 0, sizeof *c);
  size_t cap = 1 << 16; /* room for 16 blocks a call made now, not counted as the run's */
  while (cap < 32 * n)
    cap *= 2;
  census_grow(c, cap);
  c->c_heap = c_heap_bytes();
  c->slabs = e->lua_pool->slab_bytes;
  c->f = lua_getallocf(L, &c->ud);
  c->trace_from = (long)(n / 2 + 1);
  lua_setallocf(L, census_alloc, c);
  c->on = 1;
}

/* Prints the live blocks made since census_start, per call of n, and the trace. */
static void census_stop(census *c, ob_engine *e, size_t n) {
  lua_State *L = e->L;
  size_t cap = c->cap;
  c->on = 0;
  lua_setallocf(L, c->f, c->ud);
  long total = 0;
  size_t c_heap = c_heap_bytes();
  fprintf(stderr, "Lua blocks made while the run started and still live, per call (%zu calls):\n"
                  "%-44s %6s %6s %10s %10s\n", n, "kind", "size", "block", "per call", "bytes/call");
  for (int i = 0; i < c->nrows; i++) {
    census_row *r = &c->rows[i];
    if (!r->live)
      continue;
    size_t block = census_block(r->size);
    total += r->live * (long)block;
    fprintf(stderr, "%-44s %6zu %6zu %10.3f %10.1f\n", census_kind(r->tag), r->size, block,
            (double)r->live / (double)n, (double)r->live * (double)block / (double)n);
  }
  fprintf(stderr, "%-44s %6s %6s %10s %10.1f\n", "all (in blocks)", "", "", "",
          (double)total / (double)n);
  fprintf(stderr, "%-44s %6s %10s %10.1f\n", "grown, of blocks made before", "", "",
          (double)c->grown_older / (double)n);
  fprintf(stderr, "%-44s %6s %10s %10.1f\n", "freed, of blocks made before", "", "",
          -(double)c->freed_older / (double)n);
  size_t slabs = malloc_slabs(e->lua_pool->slab_bytes) - malloc_slabs(c->slabs);
  fprintf(stderr, "the C heap (malloc, not Lua's slabs) grew %.1f bytes a call%s\n",
          ((double)c_heap - (double)c->c_heap - (double)slabs) / (double)n,
          cap != c->cap ? " (and the census's own table)" : "");
  fprintf(stderr, "the blocks made from the %ld-th new thread on, in order:\n", c->trace_from);
  for (int i = 0; i < c->ntrace; i++)
    fprintf(stderr, "  %-44s %6zu -> %zu\n", census_kind(c->trace_tag[i]), c->trace_osize[i],
            c->trace_nsize[i]);
  free(c->keys);
  free(c->vals);
}

/* --- running one ----------------------------------------------------------------- */

typedef struct timing {
  ob_engine *e;
  size_t last;         /* index of the join (the call whose completion ends loop_ms) */
  double t0, t_done, t_last;
  double t_started, t_first_done, t_last_started; /* for OBELUS_BENCH_VERBOSE */
  size_t failed;
} timing;

static void on_event(void *ud, const ob_event *ev) {
  timing *t = ud;
  if (ev->type == OB_EV_FAILED || ev->type == OB_EV_SKIPPED)
    t->failed++;
  else if (ev->type == OB_EV_DONE && ev->call->index == t->last)
    t->t_last = now_ms();
  else if (ev->type == OB_EV_STARTED && ev->call->index == t->last)
    t->t_last_started = now_ms();
  else if (ev->type == OB_EV_DONE && !t->t_first_done)
    t->t_first_done = now_ms();
}

static void on_done(ob_run *run, void *ud) {
  timing *t = ud;
  (void)run;
  t->t_done = now_ms();
  uv_stop(t->e->loop);
}

int ob_bench_engine(const char *mode, size_t n, size_t ms) {
  make_keys();
  ob_value *pv = !strcmp(mode, "chain")       ? chain_plan(n)
                 : !strcmp(mode, "fanout")    ? fanout_plan(n)
                 : !strcmp(mode, "instances") ? instances_plan(n, ms)
                 : !strcmp(mode, "chains")    ? chains_plan(n, ms)
                 : !strcmp(mode, "each")      ? each_plan()
                                              : sleep_plan(n, ms);
  int verbose = getenv("OBELUS_BENCH_VERBOSE") != NULL;
  if (verbose)
    mem_note(mode, "the plan made", NULL);
  ob_error err;
  ob_engine *e = engine_with_tools();
  if (!e)
    return 2;
  /* OBELUS_BENCH_WHOLE: the plan's reading and check are timed too (what a run from a
   * plan costs: each's copies are read as a plan while it runs) */
  int whole = getenv("OBELUS_BENCH_WHOLE") != NULL;
  double t_read = now_ms();
  ob_plan *p = ob_plan_from_value(pv, mode);
  if (verbose)
    mem_note(mode, "the plan read", e);
  ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  if (p->nerrors) {
    for (size_t i = 0; i < p->nerrors && i < 5; i++)
      fprintf(stderr, "%s\n", p->errors[i]);
    return 2;
  }
  ob_value *in = ob_object_set(ob_object(), "x", 1, ob_int(0));
  if (!strcmp(mode, "each")) { /* its list */
    ob_value *list = ob_array();
    for (size_t i = 0; i < n; i++)
      list = ob_array_push(list, ob_int((int64_t)i));
    in = ob_object_set(in, "list", 4, list);
  }
  ob_value *inputs = ob_array_push(ob_array(), in);
  timing t = {.e = e, .last = p->ncalls - 1};
  /* events (a clock read each) only when asked for: a host without a listener pays none;
   * the join is the last awaited call, so on_done marks its completion too */
  const char *jmode = getenv("OBELUS_BENCH_JOURNAL");
  ob_wal *journal = NULL;
  char jpath[64];
  if (jmode && *jmode) {
    ob_fsync fs;
    snprintf(jpath, sizeof jpath, "obelus-bench-%ld.jsonl", (long)getpid());
    if (ob_fsync_parse(jmode, &fs) != OB_OK ||
        !(journal = ob_wal_open(e->loop, jpath, OB_WAL_CREATE, fs, &err))) {
      fprintf(stderr, "obelus-bench: OBELUS_BENCH_JOURNAL=%s: %s\n", jmode,
              journal ? "" : err.msg);
      return 2;
    }
  }
  ob_run_options ro = {.on_event = verbose ? on_event : NULL, .on_done = on_done, .ud = &t,
                       .journal = journal};
  ob_run *run = ob_run_new(e, p, pv, inputs, &ro, &err);
  if (!run) {
    fprintf(stderr, "obelus-bench: %s\n", err.msg);
    return 2;
  }
  if (verbose)
    mem_note(mode, "before the run", e);
  perf_control("enable");
  uv_update_time(e->loop); /* timers count from now, not from when the loop last ran */
  static census cs;
  int counting = getenv("OBELUS_BENCH_ALLOCS") != NULL;
  if (counting)
    census_start(&cs, e, n);
  t.t0 = now_ms();
  ob_run_start(run);
  t.t_started = now_ms();
  if (counting)
    census_stop(&cs, e, n);
  if (verbose)
    mem_note(mode, "ob_run_start returned", e);
  while (!ob_run_finished(run)) {
    uv_run(e->loop, UV_RUN_DEFAULT);
    if (!ob_run_finished(run) && !uv_loop_alive(e->loop) && ob_run_fail_stalled(run) == 0)
      break;
  }
  if (journal) { /* its last lines on disk: part of what the run costs */
    ob_run_journal_end(run, 0);
    ob_run_detach_journal(e, journal);
    if (ob_wal_close(journal, &err) != OB_OK)
      fprintf(stderr, "obelus-bench: %s\n", err.msg);
    unlink(jpath);
    t.t_done = now_ms();
  }
  double total_ms = (t.t_done ? t.t_done : now_ms()) - (whole ? t_read : t.t0);
  double loop_ms = (t.t_last ? t.t_last : t.t_done ? t.t_done : now_ms()) - t.t0;
  perf_control("disable");
  if (verbose)
    mem_note(mode, "the run done", e);
  if (verbose)
    fprintf(stderr, "%s: ob_run_start returned after %.1f ms, first call done at %.1f ms, "
                    "the last call started at %.1f ms, done at %.1f ms, on_done at %.1f ms\n",
            mode, t.t_started - t.t0, t.t_first_done - t.t0, t.t_last_started - t.t0, loop_ms,
            total_ms);
  if (t.failed || ob_run_failed(run) || !ob_run_finished(run)) {
    fprintf(stderr, "obelus-bench %s: %zu call%s failed or skipped\n", mode, t.failed,
            t.failed == 1 ? "" : "s");
    return 1;
  }
  char last[48];
  int many = !strcmp(mode, "instances") || !strcmp(mode, "chains");
  if (!strcmp(mode, "chain"))
    snprintf(last, sizeof last, "c%zu", n - 1);
  else if (!strcmp(mode, "instances"))
    snprintf(last, sizeof last, "c%zu", ms - 1);
  else if (!strcmp(mode, "chains"))
    snprintf(last, sizeof last, "i%zu.c%zu", n - 1, ms - 1);
  int ok = !strcmp(mode, "instances") ? check_result_in(run, "i0", last, (int64_t)ms)
           : many                     ? check_result(run, last, (int64_t)ms)
                                      : check_result(run, !strcmp(mode, "chain") ? last : "result",
                                                     (int64_t)n);
  if (!ok)
    return 1;
  /* each: its copies are calls too (the _each call, n copies, the join) */
  double per_s = (double)(!strcmp(mode, "each") ? n + 2 : p->ncalls) / (total_ms / 1e3);
  if (many)
    printf("{\"bench\":\"%s\",\"n\":%zu,\"k\":%zu,\"calls\":%zu,\"calls_per_s\":%.0f,"
           "\"peak_rss_kb\":%ld}\n",
           mode, n, ms, p->ncalls, per_s, peak_rss_kb());
  else if (!strcmp(mode, "sleep"))
    printf("{\"bench\":\"sleep\",\"n\":%zu,\"ms\":%zu,\"calls_per_s\":%.0f,\"peak_rss_kb\":%ld,"
           "\"loop_ms\":%.1f}\n",
           n, ms, per_s, peak_rss_kb(), loop_ms);
  else
    printf("{\"bench\":\"%s\",\"n\":%zu,\"calls_per_s\":%.0f,\"peak_rss_kb\":%ld}\n", mode, n,
           per_s, peak_rss_kb());
  ob_engine_free(e); /* frees the run too: it points into the plan */
  ob_plan_free(p);
  ob_unref(pv);
  ob_unref(inputs);
  free_keys();
  return 0;
}

/* --- the floor ------------------------------------------------------------------- */

int ob_bench_floor(size_t n) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_loadbuffer(L, inc_lua, sizeof inc_lua - 1, "=inc.lua") != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK) {
    fprintf(stderr, "obelus-bench: %s\n", lua_tostring(L, -1));
    return 2;
  }
  lua_getfield(L, -1, "run");
  int fn = lua_gettop(L);
  lua_Integer sum = 0;
  perf_control("enable");
  double t0 = now_ms();
  for (size_t i = 0; i < n; i++) {
    lua_State *co = lua_newthread(L);
    lua_pushvalue(L, fn);
    lua_createtable(L, 0, 1); /* call = {x = i}, as the engine hands the tool its params */
    lua_pushinteger(L, (lua_Integer)i);
    lua_setfield(L, -2, "x");
    lua_createtable(L, 0, 0); /* ctx */
    lua_xmove(L, co, 3);
    int nres;
    if (lua_resume(co, L, 2, &nres) != LUA_OK) {
      fprintf(stderr, "obelus-bench: %s\n", lua_tostring(co, -1));
      return 2;
    }
    sum += lua_tointeger(co, -1);
    lua_pop(L, 1); /* the thread: the collector takes it */
  }
  double total_ms = now_ms() - t0;
  perf_control("disable");
  if (sum != (lua_Integer)(n * (n + 1) / 2))
    fprintf(stderr, "obelus-bench floor: unexpected sum %lld\n", (long long)sum);
  printf("{\"bench\":\"floor\",\"n\":%zu,\"calls_per_s\":%.0f,\"peak_rss_kb\":%ld}\n", n,
         (double)n / (total_ms / 1e3), peak_rss_kb());
  lua_close(L);
  return 0;
}

/* --- a tool that computes ------------------------------------------------------- */

int ob_bench_compute(size_t n) {
  /* bare: the tool's run function in a coroutine of a plain Lua state */
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_loadbuffer(L, sum_lua, sizeof sum_lua - 1, "=sum.lua") != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK)
    return 2;
  lua_getfield(L, -1, "run");
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, -2);
  lua_createtable(L, 0, 1);
  lua_pushinteger(L, (lua_Integer)n);
  lua_setfield(L, -2, "n");
  lua_createtable(L, 0, 0);
  lua_xmove(L, co, 3);
  int nres;
  double t0 = now_ms();
  if (lua_resume(co, L, 2, &nres) != LUA_OK)
    return 2;
  double bare_ms = now_ms() - t0;
  lua_Integer want = lua_tointeger(co, -1);
  lua_close(L);

  /* in a run: the same function as a tool, one call */
  make_keys();
  ob_value *kn = ob_cstring("n");
  ob_value *pv = ob_array_push(ob_array(), call("sum", kn, ob_int((int64_t)n), "s"));
  ob_unref(kn);
  ob_error err;
  ob_engine *e = engine_with_tools();
  if (!e)
    return 2;
  ob_plan *p = ob_plan_from_value(pv, "compute");
  ob_plan_check_tools(p, &e->tools, 0);
  timing t = {.e = e};
  ob_run_options ro = {.on_done = on_done, .ud = &t};
  ob_run *run = p->nerrors ? NULL : ob_run_new(e, p, pv, NULL, &ro, &err);
  if (!run)
    return 2;
  uv_update_time(e->loop);
  t.t0 = now_ms();
  ob_run_start(run);
  while (!ob_run_finished(run) && uv_run(e->loop, UV_RUN_DEFAULT))
    ;
  double engine_ms = t.t_done - t.t0;
  if (!ob_run_finished(run) || ob_run_failed(run) || !check_result(run, "s", (int64_t)want))
    return 1;
  printf("{\"bench\":\"compute\",\"n\":%zu,\"engine_ms\":%.1f,\"bare_ms\":%.1f}\n", n,
         engine_ms, bare_ms);
  ob_engine_free(e);
  ob_plan_free(p);
  ob_unref(pv);
  free_keys();
  return 0;
}

/* --- one key of a big document ------------------------------------------------------ */

enum { ONEKEY_KEYS = 150000 };

/* {"k<i>": {"id": i, "name": "user <i>", "ok": true, "tags": ["x", "y"]}, ...}: ~10 MB */
static ob_value *onekey_doc(void) {
  ob_value *doc = ob_object(), *kid = ob_cstring("id"), *kname = ob_cstring("name"),
           *kok = ob_cstring("ok"), *ktags = ob_cstring("tags");
  char text[48];
  for (int i = 0; i < ONEKEY_KEYS; i++) {
    ob_value *rec = ob_object_setv(ob_object(), kid, ob_int(i));
    snprintf(text, sizeof text, "user %d", i);
    rec = ob_object_setv(rec, kname, ob_cstring(text));
    rec = ob_object_setv(rec, kok, ob_true());
    rec = ob_object_setv(rec, ktags,
                         ob_array_push(ob_array_push(ob_array(), ob_cstring("x")), ob_cstring("y")));
    snprintf(text, sizeof text, "k%d", i);
    doc = ob_object_set(doc, text, strlen(text), rec);
  }
  ob_unref(kid);
  ob_unref(kname);
  ob_unref(kok);
  ob_unref(ktags);
  return doc;
}

/* Which key call i reads: spread over the document. */
static int onekey_key(size_t i) { return (int)((i * 2477u + 11u) % ONEKEY_KEYS); }

int ob_bench_onekey(size_t n) {
  ob_value *plan = ob_array(), *kdoc = ob_cstring("doc"), *kkey = ob_cstring("key");
  make_keys();
  char key[32], out[32];
  for (size_t i = 0; i < n; i++) {
    snprintf(key, sizeof key, "k%d", onekey_key(i));
    snprintf(out, sizeof out, "r%zu", i);
    ob_value *c = call("pick", kdoc, ref("input.doc"), out);
    plan = ob_array_push(plan, ob_object_setv(c, kkey, ob_cstring(key)));
  }
  ob_unref(kdoc);
  ob_unref(kkey);
  ob_value *doc = onekey_doc();
  size_t bytes;
  free(ob_json_print(doc, OB_JSON_COMPACT, &bytes));
  ob_value *inputs = ob_array_push(ob_array(), ob_object_set(ob_object(), "doc", 3, doc));
  ob_error err;
  ob_engine *e = engine_with_tools();
  if (!e)
    return 2;
  ob_plan *p = ob_plan_from_value(plan, "onekey");
  ob_plan_check_tools(p, &e->tools, 0);
  timing t = {.e = e};
  ob_run_options ro = {.on_done = on_done, .ud = &t};
  ob_run *run = p->nerrors ? NULL : ob_run_new(e, p, plan, inputs, &ro, &err);
  if (!run) {
    fprintf(stderr, "obelus-bench onekey: %s\n", p->nerrors ? p->errors[0] : err.msg);
    return 2;
  }
  perf_control("enable");
  uv_update_time(e->loop);
  t.t0 = now_ms();
  ob_run_start(run);
  while (!ob_run_finished(run) && uv_run(e->loop, UV_RUN_DEFAULT))
    ;
  double run_ms = (t.t_done ? t.t_done : now_ms()) - t.t0;
  perf_control("disable");
  snprintf(out, sizeof out, "r%zu", n - 1);
  if (!ob_run_finished(run) || ob_run_failed(run) ||
      !check_result(run, out, (int64_t)onekey_key(n - 1)))
    return 1;
  printf("{\"bench\":\"onekey\",\"n\":%zu,\"keys\":%d,\"doc_bytes\":%zu,\"run_ms\":%.1f,"
         "\"ms_per_call\":%.3f,\"peak_rss_kb\":%ld}\n",
         n, ONEKEY_KEYS, bytes, run_ms, run_ms / (double)n, peak_rss_kb());
  ob_engine_free(e);
  ob_plan_free(p);
  ob_unref(plan);
  ob_unref(inputs);
  free_keys();
  return 0;
}
