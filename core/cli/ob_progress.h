/* ob_progress.h -- the live progress line of `obelus run`, `loop` and `resume`
 * ("done 12 · running 3 · waiting 5 · skipped 1 · failed 0 · 1.2s" at the
 * bottom of stderr, when that is a terminal). ob_progress.c tells how. Every
 * function takes NULL (no line) and then does nothing. */
#ifndef OB_PROGRESS_H
#define OB_PROGRESS_H

#include <stddef.h>
#include <uv.h>

#include "engine/ob_run.h"

typedef struct ob_progress ob_progress;

/* The line, when stderr is a terminal that can erase a line and nothing else
 * needs it: NULL when approve (--approve asks there) or events is "-" (the
 * events go there). Replaces stderr (and stdout, when a terminal) by streams
 * that erase the line before they write: call it before the engine exists. */
ob_progress *ob_progress_install(int approve, const char *events);

/* Puts the real streams back and frees pg: after the engine (which holds the
 * stand-ins in Lua) is freed, and after ob_progress_close_timer. */
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
