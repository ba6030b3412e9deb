/* obelus-bench.c -- micro-benchmarks of the engine's hot paths, one JSON line each.
 *   obelus-bench resolve N   append N output messages over ~1,000 paths of depth 4,
 *                            then read depth-4 paths: ns per read, ns per append
 *   obelus-bench history N   the same log, read as of random earlier positions
 *   obelus-bench chain|fanout|floor|compute|onekey N, sleep N MS   whole runs: see bench_engine.c
 *   obelus-bench cutoff      a table against a view, by size: see bench_view.c
 *   obelus-bench fork N      a chain of N calls forked from its middle: see bench_fork.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "log/ob_log.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

enum { NPATHS = 1000, NREADS = 2000000 };

/* Path i: a<i%10>.b<i/10%10>.c<i/100%10>.v -- 1,000 distinct leaves at depth 4. */
static void make_paths(ob_path *paths) {
  char text[64];
  ob_error err;
  for (int i = 0; i < NPATHS; i++) {
    int n = snprintf(text, sizeof text, "a%d.b%d.c%d.v", i % 10, i / 10 % 10, i / 100 % 10);
    if (ob_path_parse(text, (size_t)n, &paths[i], &err) != OB_OK) {
      fprintf(stderr, "%s\n", err.msg);
      exit(2);
    }
  }
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static ob_log *build(size_t n, ob_path *paths, double *ns_per_append) {
  ob_log *log = ob_log_new();
  ob_error err;
  ob_value *call = ob_json_parse("{\"_tool\":\"bench\"}", 17, &err);
  double t0 = now_ns();
  for (size_t i = 0; i < n; i++) {
    ob_value *v = ob_int((int64_t)i);
    if (ob_log_append_output(log, "state", NULL, &paths[next_rand() % NPATHS], OB_METHOD_SET, v,
                             call, &err) < 0) {
      fprintf(stderr, "append: %s\n", err.msg);
      exit(1);
    }
    ob_unref(v);
  }
  *ns_per_append = (now_ns() - t0) / (double)n;
  ob_unref(call);
  return log;
}

static int bench(const char *what, size_t n) {
  static ob_path paths[NPATHS];
  make_paths(paths);
  double ns_append;
  ob_log *log = build(n, paths, &ns_append);
  size_t idx[4096];
  size_t at[4096];
  for (int i = 0; i < 4096; i++) {
    idx[i] = next_rand() % NPATHS;
    at[i] = 1 + next_rand() % n;
  }
  int history = !strcmp(what, "history");
  size_t present = 0;
  double t0 = now_ns();
  for (size_t r = 0; r < NREADS; r++) {
    ob_value *v = ob_log_read(log, "state", NULL, &paths[idx[r & 4095]],
                              history ? at[r & 4095] : OB_LOG_NOW);
    present += v != NULL;
    ob_unref(v);
  }
  double ns_read = (now_ns() - t0) / NREADS;
  if (history)
    printf("{\"bench\":\"history\",\"messages\":%zu,\"ns_per_read_at\":%.1f,\"peak_rss_kb\":%ld}\n",
           n, ns_read, peak_rss_kb());
  else
    printf("{\"bench\":\"resolve\",\"messages\":%zu,\"ns_per_read\":%.1f,\"ns_per_append\":%.1f}\n",
           n, ns_read, ns_append);
  if (!present)
    fprintf(stderr, "warning: every read was absent\n");
  ob_log_free(log);
  for (int i = 0; i < NPATHS; i++)
    ob_path_free(&paths[i]);
  return 0;
}

int ob_bench_engine(const char *mode, size_t n, size_t ms); /* bench_engine.c */
int ob_bench_floor(size_t n);
int ob_bench_compute(size_t n);
int ob_bench_onekey(size_t n);
int ob_bench_cutoff(void);
int ob_bench_fork(size_t n); /* bench_fork.c */

int main(int argc, char **argv) {
  size_t n = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 0;
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "cutoff") && argc == 2)
    return ob_bench_cutoff();
  if (!strcmp(mode, "fork") && argc == 3 && n >= 2)
    return ob_bench_fork(n);
  if ((!strcmp(mode, "sleep") || !strcmp(mode, "instances") || !strcmp(mode, "chains")) &&
      argc == 4 && n)
    return ob_bench_engine(mode, n, (size_t)strtoull(argv[3], NULL, 10));
  if (argc != 3 || !n ||
      (strcmp(mode, "resolve") && strcmp(mode, "history") && strcmp(mode, "chain") &&
       strcmp(mode, "fanout") && strcmp(mode, "floor") && strcmp(mode, "compute") &&
       strcmp(mode, "onekey") && strcmp(mode, "each"))) {
    fprintf(stderr, "usage: obelus-bench resolve|history|chain|fanout|each|floor|compute|onekey N\n"
                    "       obelus-bench cutoff\n"
                    "       obelus-bench fork N\n"
                    "       obelus-bench sleep N MS\n"
                    "       obelus-bench instances|chains N K\n");
    return 2;
  }
  if (!strcmp(mode, "floor"))
    return ob_bench_floor(n);
  if (!strcmp(mode, "compute"))
    return ob_bench_compute(n);
  if (!strcmp(mode, "onekey"))
    return ob_bench_onekey(n);
  if (!strcmp(mode, "chain") || !strcmp(mode, "fanout") || !strcmp(mode, "each"))
    return ob_bench_engine(mode, n, 0);
  return bench(mode, n);
}
