/* ob_resume.h -- taking a run up again from its journal (ob_resume.c). */
#ifndef OB_RESUME_H
#define OB_RESUME_H

#include "engine/ob_run.h"
#include "log/ob_wal.h"

typedef struct ob_resume ob_resume;

/* Reads the journal at path. NULL with err naming the file and line when it
 * is not a journal, a line other than the last is not JSON, or the run never
 * began. A torn last line is ignored, and the messages of a call that never settled
 * dropped: the caller says so (ob_resume_torn, ob_resume_dropped; ob_resume_say). */
ob_resume *ob_resume_load(const char *path, ob_error *err);
/* The torn last line's number (0: none), and the messages dropped. */
size_t ob_resume_torn(const ob_resume *rs);
size_t ob_resume_dropped(const ob_resume *rs);
/* Says both as the engine's notes "torn" and "dropped" (ob_engine_note), for hosts. */
void ob_resume_say(ob_engine *e, const ob_resume *rs);
void ob_resume_free(ob_resume *rs);
/* The journal's path, as given to ob_resume_load. */
const char *ob_resume_path(const ob_resume *rs);
/* The plan as it ran (borrowed), and its file as the run named it. */
const ob_value *ob_resume_plan(const ob_resume *rs);
const char *ob_resume_plan_file(const ob_resume *rs);
/* The tool files the run had (ob_engine_tool_files' form), or NULL. */
const ob_value *ob_resume_tool_files(const ob_resume *rs);
/* 1 when the run ran to its end ({"journal":"end"}); its exit status then. */
int ob_resume_ended(const ob_resume *rs, int *exit_status);
/* What changed since the run (the plan file, tool files: their contents or
 * which are loaded), described in why; returns how many. */
size_t ob_resume_changes(const ob_resume *rs, const ob_engine *e, ob_buf *why);
/* The journal as read: *whole, the bytes of its complete lines; *keep, how many of
 * them stay (up to its last record: what came after never settled). */
void ob_resume_lengths(const ob_resume *rs, uint64_t *whole, uint64_t *keep);
/* A run of plan (made from ob_resume_plan, validated) whose log and calls
 * are as the journal left them; ob_run_start goes on from there. key names
 * which run of the journal: "" the top-level one, a delegated plan's scope
 * ("#1", "#1/#0", "step 2/#1"), a loop step's "step N". With opt->log (a
 * loop's shared log, filled by ob_resume_fill_log) no message is appended;
 * else the run's own committed messages make its log. A run is taken up
 * once: a later ob_resume_has_run of its key says 0. */
ob_run *ob_resume_run(ob_engine *e, ob_plan *plan, ob_resume *rs, const char *key,
                      const ob_run_options *opt, ob_error *err);
/* The top-level run's records against its plan, and each delegated run's that may be
 * taken up against the plan it ran (its plan message): every call id and delegated
 * scope they name is the plan's, and every call that settled done with an output has
 * its output message. OB_OK, or OB_EINVAL with err naming the journal's line (what
 * ob_resume_run checks of each run it takes up; the hosts ask first, before the
 * journal is opened, so that nothing runs). ob_resume_load checked the rest of its
 * consistency. */
int ob_resume_verify(const ob_resume *rs, const ob_plan *plan, ob_error *err);
/* 1 when the journal holds a run of key that began and was not taken up yet. */
int ob_resume_has_run(const ob_resume *rs, const char *key);
/* That run's plan as it ran (borrowed), or NULL. */
const ob_value *ob_resume_part_plan(const ob_resume *rs, const char *key);
/* Appends the top-level committed messages (a loop's: every step's) to log. */
int ob_resume_fill_log(const ob_resume *rs, ob_log *log, ob_error *err);
/* obelus loop's journals: the first run record's "loop" ({"planner":{file,
 * size, hash}, "max_steps":N}), or NULL for a plain run's; the last step begun (0: the first plan's run);
 * the output the end record holds, or NULL. */
const ob_value *ob_resume_loop(const ob_resume *rs);
int ob_resume_last_step(const ob_resume *rs);
const ob_value *ob_resume_output(const ob_resume *rs);

#endif
