/* ob_drive_resume.c -- taking a journal's top-level run up on an engine: the steps of a
 * driven run that is resumed (ob_drive.h: ob_drun_from_resume, ob_drun_open_journal,
 * ob_drun_make), which `obelus resume`, obelus_resume, engine:resume and a worker's
 * claimed job all go through, between reading the journal (ob_resume.c) and driving
 * the run.
 *
 * Design
 * ------
 * Resuming is, in order:
 *   1. the plan as it ran (the journal's first line, never the plan file as it
 *      is now) made a plan and checked against the engine's tools: a tool gone
 *      or changed beyond its schema is a problem, and nothing runs;
 *   2. what changed since the run: the plan file, a delegated plan, the tool
 *      files (their contents, or which are loaded; C tools have no file and
 *      are never compared). The caller refuses the journal unless forced,
 *      each in its own words (--force for the CLI, force for the APIs);
 *   3. for a run that did not end, the journal opened to append under the
 *      caller's fsync level and locked (ob_wal: another writer is refused),
 *      checked to be as it was read, and cut back to its last record (what
 *      follows never settled); a run that ended appends nothing and gets no journal;
 *   4. the run made as the journal left it (ob_resume_run), writing to that
 *      journal and finding its delegated runs' records in the journal too;
 *   5. once it has finished: the exit status (the recorded one for a run that
 *      had ended; else what the run says), written as the end record like any
 *      driven run's (ob_drun_exit_status, ob_drun_end_journal).
 * Steps 1-2 and 3 are apart because the CLI speaks between them (its --force
 * notice comes before a failure to open the journal) and `obelus loop`'s
 * journals take step 4 their own way (ob_cmd_loop.c's ob_cmd_loop_resume);
 * the APIs refuse those journals.
 *
 * Costs: one parse of the plan file (step 2) and a read of each tool file
 * (their hashes); the rest is ob_resume_run's. */
#include <stdlib.h>

#include "drive/ob_drive.h"
#include "drive/ob_drive_int.h"
#include "engine/ob_resume.h"
#include "log/ob_wal.h"

ob_plan *ob_resume_check(ob_resume *rs, ob_engine *e, const char *name, const char *plans_root,
                         ob_value **plan_value, ob_buf *why, size_t *nchanges) {
  ob_value *pv = *plan_value = ob_ref((ob_value *)ob_resume_plan(rs));
  ob_plan *p = ob_plan_from_value(pv, name ? name : ob_resume_plan_file(rs));
  char *dir = plans_root ? NULL : ob_plan_default_root(ob_resume_plan_file(rs));
  ob_error err;
  if (!(p->root = ob_plans_root(plans_root ? plans_root : dir, &err)))
    ob_plan_error(p, NULL, "%s", err.msg);
  free(dir);
  ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  *nchanges = p->nerrors ? 0 : ob_resume_changes(rs, e, why);
  return p;
}

int ob_resume_open(const ob_resume *rs, uv_loop_t *loop, ob_fsync mode, ob_wal **journal,
                   ob_error *err) {
  *journal = NULL;
  if (ob_resume_ended(rs, NULL))
    return OB_OK;
  /* opened (and locked) first, then cut: a journal another obelus is writing is
   * refused before anything of it is cut */
  if (!(*journal = ob_wal_open(loop, ob_resume_path(rs), OB_WAL_APPEND, mode, err)))
    return err->code;
  uint64_t whole, keep;
  ob_resume_lengths(rs, &whole, &keep);
  if (ob_wal_cut_to(*journal, whole, keep) != OB_OK) {
    const char *why = ob_wal_error(*journal);
    ob_error_set(err, OB_EIO, 0, "%s", why ? why : "cannot cut the journal back");
    ob_wal_close(*journal, NULL);
    *journal = NULL;
    return err->code;
  }
  return OB_OK;
}

ob_run *ob_resume_start(ob_engine *e, ob_plan *plan, ob_resume *rs, ob_wal *journal,
                        ob_run_options *ro, ob_error *err) {
  ro->journal = journal;
  ro->resume = rs;
  return ob_resume_run(e, plan, rs, "", ro, err);
}
