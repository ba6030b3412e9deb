/* ob_progress.h -- the live progress line of `obelus run`, `loop` and `resume`
 * ("done 12 · running 3 · waiting 5 · skipped 1 · failed 0 · 1.2s" at the
 * bottom of stderr, when that is a terminal). ob_progress.c tells how. Every
 * function takes NULL (no line) and then does nothing. */
#ifndef OB_PROGRESS_H
#define OB_PROGRESS_H

#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "engine/ob_run.h"

typedef struct ob_progress ob_progress;

/* The line, when stderr is a terminal that can erase a line and nothing else
 * needs it: NULL when approve (--approve asks there) or events is "stderr" (the
 * events go there). Makes the tools' streams, which erase the line before they
 * write (ob_progress_out/err: each engine's, ob_cli_engine_stdio). */
ob_progress *ob_progress_install(int approve, const char *events);

/* The tools' stdout (NULL when stdout is no terminal, or pg NULL) and stderr. */
FILE *ob_progress_out(const ob_progress *pg);
FILE *ob_progress_err(const ob_progress *pg);

/* Erases the line of the process, if one is shown (it comes back at the next
 * event or tick): what the CLI calls before it writes a whole line (or lines) to
 * the terminal. */
void ob_progress_clear(void);

/* Closes the tools' streams and frees pg: after the engines (which hold the
 * streams in Lua) are freed, and after ob_progress_close_timer. */
void ob_progress_remove(ob_progress *pg);

/* Starts the clock and the 100 ms redraw timer (unref'd) on loop. */
void ob_progress_start(ob_progress *pg, uv_loop_t *loop);

/* Closes the redraw timer (uv_close; the loop must run once more to finish it). */
void ob_progress_close_timer(ob_progress *pg);

/* The run drawn from now on, with its ncalls calls. */
void ob_progress_set_run(ob_progress *pg, const ob_run *run, size_t ncalls);

/* The line drawn from fn's counts (by ob_call_state) instead of a run's calls:
 * a run on threads (ob_shard.h). fn is called on the loop's thread only. */
typedef void (*ob_progress_counts_fn)(void *ud, size_t n[6]);
void ob_progress_set_counts(ob_progress *pg, ob_progress_counts_fn fn, void *ud);

/* A scheduler event of the run: redraws at most ten times a second, always on run_done. */
void ob_progress_event(ob_progress *pg, const ob_event *ev);

/* The run ends: its counts stay in the line (a loop runs several), the line goes. */
void ob_progress_end_run(ob_progress *pg);

#endif
