/* ob_cmd_loop.h -- what `obelus resume` needs of `obelus loop` (ob_cmd_loop.c):
 * taking up a loop's journal. */
#ifndef OB_CMD_LOOP_H
#define OB_CMD_LOOP_H

#include "engine/ob_resume.h"
#include "cli/ob_runner.h"

/* `resume` of a loop's journal (ob_resume_loop(rs) not NULL), opened to
 * append in *journal, which it takes: the planner and --max-steps as the
 * loop had them (a changed planner refused unless o->force), the shared log
 * rebuilt, the step the journal reached taken up, then the planner asked
 * from the next step on. Frees e (before the step plans its runs point
 * into). Returns the exit status. */
int ob_cmd_loop_resume(ob_cmd_options *o, ob_engine *e, ob_plan *p, ob_resume *rs,
                       ob_wal **journal);

#endif
