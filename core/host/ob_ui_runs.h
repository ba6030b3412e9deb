/* ob_ui_runs.h -- the runs `obelus ui` drives itself (ob_ui_runs.c): started from the
 * page (POST /api/runs), resumed, forked; cancelled; their approvals answered there. */
#ifndef OB_UI_RUNS_H
#define OB_UI_RUNS_H

#include "base/ob_error.h"
#include "base/ob_value.h"
#include "engine/ob_engine.h"
#include "engine/ob_run.h"

typedef struct ob_ui_runs ob_ui_runs;

/* Told when a run's calls waiting for approval change: the journal's path, and the
 * JSON of the list (ob_ui_runs_waiting's). */
typedef void (*ob_ui_runs_notify_fn)(void *ud, const char *path, const char *json, size_t len);

/* Runs on e (its tools), their journals written under dir/ui/ (made when needed), each
 * with the limits of limits (concurrency, max_calls, max_output, call_timeout_ms,
 * max_depth, max_slice_ms; the rest ignored). */
ob_ui_runs *ob_ui_runs_new(ob_engine *e, const char *dir, const ob_run_options *limits,
                           ob_ui_runs_notify_fn notify, void *ud);

/* The operations, each answering as an HTTP status (its message in err for 4xx/5xx):
 * - start: body {"plan": PLAN, "input": DOC?, "name": "x"?, "approve": true?} (201,
 *   *path the new journal's absolute path, to free);
 * - cancel: a run started or taken up here (200), else 409;
 * - approve: body {"call": ID, "decision": "yes"|"no", "params": {...}?} (200);
 * - resume: a run killed, taken up here (200; *path its journal);
 * - fork: body {"at": N} or {"from": ID}, "set": {"†kind.path": JSON...}?, "input":
 *   [DOC...]? (201, *path the new journal's). */
int ob_ui_runs_start(ob_ui_runs *x, const char *body, size_t len, char **path, ob_error *err);
int ob_ui_runs_cancel(ob_ui_runs *x, const char *path, ob_error *err);
int ob_ui_runs_approve(ob_ui_runs *x, const char *path, const char *body, size_t len,
                       ob_error *err);
int ob_ui_runs_resume(ob_ui_runs *x, const char *path, const char *body, size_t len,
                      ob_error *err);
int ob_ui_runs_fork(ob_ui_runs *x, const char *path, const char *body, size_t len, char **newpath,
                    ob_error *err);

/* The calls of the run at path waiting for an answer, [{"call", "scope", "tool",
 * "instance", "params"}...] (a new reference), or NULL when it is not driven here or
 * none waits. */
ob_value *ob_ui_runs_waiting(ob_ui_runs *x, const char *path);
/* 1 while the run at path is driven here and not finished. */
int ob_ui_runs_live(const ob_ui_runs *x, const char *path);

/* Cancels every run (their journals stay resumable) and frees x. */
void ob_ui_runs_free(ob_ui_runs *x);

#endif
