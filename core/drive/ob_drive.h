/* ob_drive.h -- the run driver every host shares (the drive layer: what the CLI, the C
 * API, the Lua module, MCP and the worker each did for themselves, gathered here as it
 * moves). For now: taking a journal's run up again (ob_resume_start.c). */
#ifndef OB_DRIVE_H
#define OB_DRIVE_H

#include "engine/ob_resume.h"

/* --- taking the top-level run up (ob_resume_start.c): what `obelus resume`,
 * obelus_resume and engine:resume share, in the order they do it --- */

/* The plan as it ran, made a plan (named name; NULL: the file the run named)
 * and checked against e's tools: its problems in ->errors. Its plans root
 * (_delegate) is plans_root, or, when NULL, the folder of the plan file the
 * run named. When it has none,
 * what changed since the run is described in why and counted in *nchanges
 * (the caller refuses to go on unless forced). *plan_value gets the plan's
 * value (a new reference): release it, and free the plan, after the run. */
ob_plan *ob_resume_check(ob_resume *rs, ob_engine *e, const char *name, const char *plans_root,
                         ob_value **plan_value, ob_buf *why, size_t *nchanges);
/* Makes the journal ready for what the resumed run appends: for a run that
 * did not end, opened to append under mode (locked: a journal another obelus
 * writes is refused; one that changed since it was read too), then cut back to
 * its last record
 * (*journal; the caller closes it after the run, ob_run_detach_journal first
 * if runs still use it); for a run that ended, nothing (*journal NULL). */
int ob_resume_open(const ob_resume *rs, uv_loop_t *loop, ob_fsync mode, ob_wal **journal,
                   ob_error *err);
/* The journal's top-level run on e, as the journal left it, writing to journal
 * (ob_resume_open's): sets ro's journal and resume. rs outlives the run. */
ob_run *ob_resume_start(ob_engine *e, ob_plan *plan, ob_resume *rs, ob_wal *journal,
                        ob_run_options *ro, ob_error *err);
/* Once that run has finished: its exit status, the one recorded for a run
 * that had ended, else 1 when some call failed, 0 otherwise; written as the
 * journal's end record (a run that had ended writes nothing). */
int ob_resume_finish(const ob_resume *rs, ob_run *r);

#endif
