/* bench_fork.c -- obelus-bench fork N: a chain of N calls run with a journal through the
 * public API, then forked from its middle call (obelus_fork, --from c<N/2>, with a --set
 * of the value it reads): how long from the fork's start to the run made (its journal
 * written, read back, checked), to its first call started (obelus_run_start starts the
 * ready ones) and to its end, with the chain's own run time beside them. The journal
 * is written to the current folder (a real disk) and removed after. One JSON line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "obelus.h"

int ob_bench_fork(size_t n);

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int ob_bench_fork(size_t n) {
  char tools[64], journal[64], forked[64], set[64];
  snprintf(tools, sizeof tools, "obelus-bench-%ld.lua", (long)getpid());
  snprintf(journal, sizeof journal, "obelus-bench-%ld.jsonl", (long)getpid());
  snprintf(forked, sizeof forked, "obelus-bench-%ld-fork.jsonl", (long)getpid());
  FILE *t = fopen(tools, "w");
  fputs("return { { name = 'inc', run = function(c) return c.x + 1 end } }\n", t);
  fclose(t);
  /* the chain: c0 reads the input, ci reads c(i-1) */
  size_t cap = n * 96 + 64, len = 0;
  char *plan = malloc(cap);
  len += (size_t)snprintf(plan + len, cap - len, "[");
  for (size_t i = 0; i < n; i++) {
    char in[32];
    if (i)
      snprintf(in, sizeof in, "state.c%zu", i - 1);
    else
      snprintf(in, sizeof in, "input.x");
    len += (size_t)snprintf(plan + len, cap - len,
                            "%s{\"_id\":\"c%zu\",\"_tool\":\"inc\",\"x\":\"\xE2\x80\xA0%s\","
                            "\"_outputPath\":\"\xE2\x80\xA0state.c%zu\"}",
                            i ? "," : "", i, in, i);
  }
  snprintf(plan + len, cap - len, "]");
  obelus_engine *e;
  obelus_run *run;
  if (obelus_engine_new(&e, NULL) != OBELUS_OK || obelus_engine_load_tools(e, tools) != OBELUS_OK)
    return 2;
  FILE *j = fopen(journal, "w");
  obelus_run_options opt = {.journal = j, .input = "{\"x\":0}"};
  double t0 = now_ms();
  if (obelus_run_new(e, &run, plan, &opt) != OBELUS_OK || obelus_run_start(run) != OBELUS_OK ||
      obelus_run_wait(run) != 0) {
    fprintf(stderr, "obelus-bench fork: the chain: %s\n", obelus_engine_errmsg(e));
    return 1;
  }
  double chain_ms = now_ms() - t0;
  obelus_run_free(run);
  fclose(j);
  free(plan);
  char from[32];
  snprintf(from, sizeof from, "c%zu", n / 2);
  snprintf(set, sizeof set, "\xE2\x80\xA0state.c%zu=0", n / 2 - 1);
  const char *sets[] = {set};
  obelus_fork_options fo = {.journal = forked, .from = from, .sets = sets, .nsets = 1};
  obelus_run_options fopt = {0};
  t0 = now_ms();
  int rc = obelus_fork(e, &run, journal, &fo, &fopt);
  double made_ms = now_ms() - t0;
  /* the calls ready at the start start inside obelus_run_start: the first re-run one */
  if (rc != OBELUS_OK || obelus_run_start(run) != OBELUS_OK) {
    fprintf(stderr, "obelus-bench fork: %s\n", obelus_engine_errmsg(e));
    return 1;
  }
  double first_ms = now_ms() - t0;
  if (obelus_run_wait(run) != 0) {
    fprintf(stderr, "obelus-bench fork: %s\n", obelus_engine_errmsg(e));
    return 1;
  }
  double end_ms = now_ms() - t0;
  char *out = obelus_run_output(run); /* the state: c<n-1> is n - n/2 (counted from 0) */
  char want[64];
  snprintf(want, sizeof want, "\"c%zu\":%zu", n - 1, n - n / 2);
  int ok = out && strstr(out, want);
  free(out);
  obelus_run_free(run);
  obelus_engine_free(e);
  unlink(tools);
  unlink(journal);
  unlink(forked);
  if (!ok) {
    fprintf(stderr, "obelus-bench fork: a wrong output\n");
    return 1;
  }
  printf("{\"bench\":\"fork\",\"n\":%zu,\"chain_ms\":%.1f,\"fork_made_ms\":%.1f,"
         "\"first_call_ms\":%.1f,\"fork_end_ms\":%.1f}\n",
         n, chain_ms, made_ms, first_ms, end_ms);
  return 0;
}
