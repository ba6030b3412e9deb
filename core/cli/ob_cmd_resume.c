/* ob_cmd_resume.c -- `obelus resume JOURNAL`: take up the run a journal tells
 * of, as if it had never stopped; and `obelus fork`, a resume of a journal made
 * from a point of another (ob_fork.c writes it).
 *
 * Design
 * ------
 * The journal names everything: the plan as it ran (never the plan file as it
 * is now), its file (for the plans root and the change check), the tool files
 * it had (loaded again unless --tools is given), its inputs. So --journal and
 * --input are refused: resume appends to that journal and reads its inputs
 * from it. Then, as ob_drive_resume.c lays out and shares with obelus_resume
 * and engine:resume: the plan checked against the tools (problems: exit 2),
 * what changed since the run refused unless --force (said either way), the
 * journal cut back and opened to append, the run made as the journal left it
 * and driven by the runner (ob_runner.c) like `obelus run`'s. A run that had
 * ended runs nothing: it prints its output again and exits as it did. A loop's
 * journal goes on in ob_cmd_loop.c (ob_cmd_loop_resume), which asks the
 * planner again from the step the journal reached.
 *
 * Costs: one read of the journal and the log rebuilt from it (ob_resume.c),
 * a hash of each tool file; the calls that completed are not run again. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/ob_cli.h"
#include "cli/ob_cmd_loop.h"
#include "engine/ob_fork.h"
#include "engine/ob_resume.h"
#include "drive/ob_drive.h"
#include "cli/ob_runner.h"

static const char fork_help[] =
    "usage: obelus fork JOURNAL (--at N | --from CALL_ID) [--set 'REF=JSON']... [--input JSON]...\n"
    "                   --journal NEW [--overwrite] [--tools PATH]... [run options]\n"
    "\n"
    "Starts a new run from a point of a finished, failed or killed run, with changes,\n"
    "keeping what came before. NEW begins with JOURNAL's messages up to the point:\n"
    "its first N messages (--at N, as `obelus log --at N` counts them), or all but\n"
    "those of CALL_ID and what follows from it (--from). Each --set 'REF=JSON'\n"
    "(REF a reference: \u2020state.city) and --input JSON is then written as a message\n"
    "of its own (\"_call\": {\"_tool\": \"fork\"}), and the run goes on: every call that\n"
    "had not completed before the point, CALL_ID, every call that reads a path a\n"
    "--set touched (or the input, with --input) and everything that depends on those\n"
    "runs; calls whose inputs are unchanged are not run again. JOURNAL is never\n"
    "written. NEW's first record names JOURNAL and the point; `obelus resume NEW`\n"
    "takes a killed fork up, and a fork can be forked. Without --tools, the tool\n"
    "files the run had are loaded again; files changed since are said, not refused.\n"
    "Forks are of the top-level plan: --from a copy of an _each call or a call of a\n"
    "delegated plan is refused (fork from the call that made it), and so is a\n"
    "journal of `obelus loop`. Exits as `obelus run` does; 2 for a bad point, a\n"
    "journal that is not one, or NEW existing (--overwrite replaces it).\n"
    "\n"
    "examples:\n"
    "  obelus fork run.jsonl --from summarize --journal retry.jsonl\n"
    "  obelus fork run.jsonl --at 5 --set '\u2020state.city=\"Oslo\"' --journal oslo.jsonl\n";

static const char resume_help[] =
    "usage: obelus resume JOURNAL [--tools PATH]... [--force] [--latent FILE] [run options]\n"
    "\n"
    "Takes up the run whose journal (run --journal) is JOURNAL: rebuilds its log,\n"
    "runs only the calls that did not complete (a call that had started and not\n"
    "completed runs again: at least once), appends to the same journal, and\n"
    "prints the output and exits as the uninterrupted run would have. Without\n"
    "--tools, the tool files the run had are loaded again. A plan or tool file\n"
    "that changed since the run is refused (exit 2) unless --force. A run that\n"
    "ended prints its output again and runs nothing. Delegated plans stay confined\n"
    "to the plan's folder, or to --plans-root DIR (give the run's again).\n"
    "A journal another obelus is writing (it is locked) or an inconsistent one\n"
    "(a call's messages without its settled record, ids not in the plan: an\n"
    "edited journal; the line is named) is refused, exit 2. Exit 4: the journal,\n"
    "stdout or --events could not be written.\n"
    "\n"
    "example:\n"
    "  obelus run plan.json --tools tools/ --journal run.jsonl   # killed midway\n"
    "  obelus resume run.jsonl\n";

/* Takes up the run of journal rs (taken) as `obelus CMD` (resume, fork): a fork always
 * goes on when files changed since (it says what changed); resume only with --force. */
static int take_up(ob_cmd_options *o, ob_resume *rs, const char *cmd, int fork) {
  if (ob_resume_torn(rs))
    ob_eprintf("obelus: %s:%zu: the last line is torn (the process died while writing it); "
               "ignored\n", ob_resume_path(rs), ob_resume_torn(rs));
  if (ob_resume_dropped(rs))
    ob_eprintf("obelus %s: %s: %zu message%s of a call that never settled dropped\n", cmd,
               ob_resume_path(rs), ob_resume_dropped(rs), ob_resume_dropped(rs) == 1 ? "" : "s");
  const char *journal_path = ob_resume_path(rs);
  o->plan = ob_resume_plan_file(rs);
  o->pg = ob_progress_install(o->approve, o->events);
  ob_engine *e = NULL;
  ob_drun *d = NULL;
  ob_error err;
  int rc = OB_EXIT_USAGE;
  if (ob_cmd_plans_root(o) != OB_EXIT_OK)
    goto done;
  if (!(e = ob_engine_new(NULL, &err))) {
    ob_eprintf("obelus %s: %s\n", cmd, err.msg);
    goto done;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  ob_cmd_engine_limits(o, e); /* before any tool file: they write through its streams */
  const ob_value *then = ob_resume_tool_files(rs);
  for (size_t i = 0; !o->ntools && then && i < ob_array_len(then); i++) {
    ob_value *f = ob_object_get(ob_array_get(then, i), "file", 4);
    if (f && ob_typeof(f) == OB_STRING && ob_engine_load_tools(e, ob_string_ptr(f), &err) != OB_OK) {
      ob_eprintf("obelus %s: %s\n", cmd, err.msg);
      goto done;
    }
  }
  if (ob_cmd_load(o, e) != OB_EXIT_OK)
    goto done;
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  d = ob_drun_from_resume(e, rs, o->plan, o->root, &why, &changes);
  rs = NULL; /* the driven run's */
  ob_plan *p = ob_drun_plan(d);
  for (size_t i = 0; i < p->nerrors; i++)
    ob_eprintf("%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus %s: %zu problem%s, nothing ran\n", cmd, p->nerrors,
            p->nerrors == 1 ? "" : "s");
    ob_buf_free(&why);
    goto done;
  }
  if (changes && !o->force && !fork) {
    ob_eprintf("obelus resume: %s: %s; nothing ran (--force resumes anyway)\n",
            journal_path, why.data);
    ob_buf_free(&why);
    goto done;
  }
  if (changes)
    ob_eprintf("obelus %s: %s%s\n", cmd, fork ? "" : "--force: ", why.data);
  ob_buf_free(&why);
  if (ob_cmd_check_files(o, d, o->plan, journal_path, o->events, 1) != OB_EXIT_OK)
    goto done;
  /* checked to be as it was read, then opened to append and cut back (none for a run
   * that ended) */
  if (ob_drun_open_journal(d, NULL, 0, o->fsync, &err) != OB_OK) {
    ob_eprintf("obelus %s: %s\n", cmd, err.msg);
    goto done;
  }
  ob_resume *ran = ob_drun_resume(d);
  int ended_status = 0, ended = ob_resume_ended(ran, &ended_status);
  if (ob_resume_loop(ran) && ended) { /* the loop's output again, nothing run */
    ob_runner rn; /* where the output goes: stdout, or --events -'s last line */
    if ((rc = ob_runner_open(&rn, o, e, NULL)) == OB_EXIT_OK) {
      rc = ended_status;
      if (ob_resume_output(ran) && ob_runner_print_output(&rn, ob_resume_output(ran)) != OB_EXIT_OK)
        rc = OB_EXIT_WRITE;
    }
    rc = ob_runner_close(&rn, NULL, rc);
    goto done;
  }
  if (ob_resume_loop(ran)) {
    ob_wal *journal = ob_drun_take_journal(d);
    rc = ob_cmd_loop_resume(o, e, p, ran, &journal);
    if (journal) /* refused before the loop took the journal and the engine */
      ob_runner_journal_close(e, &journal, cmd);
    else
      e = NULL; /* the loop freed it, before the step plans its runs point into */
    goto done;
  }
  ob_runner rn;
  if ((rc = ob_runner_open(&rn, o, e, NULL)) == OB_EXIT_OK)
    rc = ob_runner_run(&rn, d);
  rc = ob_runner_close(&rn, NULL, rc);
done:
  ob_drun_free(d); /* its run first, then the engine */
  ob_engine_free(e);
  ob_progress_remove(o->pg);
  ob_resume_free(rs);
  return rc;
}

int ob_cmd_resume(int argc, char **argv) {
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, resume_help);
  if (rc) {
    ob_unref(o.inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  if (o.journal || ob_array_len(o.inputs)) {
    ob_unref(o.inputs);
    return ob_cli_usage_error("resume", "--journal and --input are the run's: resume appends to "
                                        "its journal and reads its inputs from it");
  }
  ob_error err;
  ob_resume *rs = ob_resume_load(o.plan, &err);
  if (!rs) {
    ob_eprintf("obelus resume: %s\n", err.msg);
    ob_unref(o.inputs);
    return OB_EXIT_USAGE;
  }
  rc = take_up(&o, rs, "resume", 0);
  ob_unref(o.inputs);
  free(o.root);
  return rc;
}

int ob_cmd_fork(int argc, char **argv) {
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, fork_help);
  if (rc) {
    ob_unref(o.inputs);
    ob_unref(o.sets);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  rc = OB_EXIT_USAGE;
  ob_error err;
  ob_fork_result res;
  ob_fork_options fo = {.source = o.plan, .at = o.fork_at, .from = o.fork_from, .sets = o.sets,
                        .inputs = o.inputs, .journal = o.journal, .overwrite = o.overwrite,
                        .fsync = o.fsync};
  ob_resume *rs = NULL;
  if (!o.journal)
    ob_cli_usage_error("fork", "needs --journal NEW: the fork's own journal (the one forked is "
                               "never written)");
  else if (ob_fork_write(&fo, &res, &err) != OB_OK)
    ob_eprintf("obelus fork: %s\n", err.msg);
  else if (!(rs = ob_resume_load(o.journal, &err)))
    ob_eprintf("obelus fork: %s\n", err.msg);
  else {
    ob_eprintf("obelus fork: %s: %zu message%s inherited, %zu call%s kept, %zu to run\n",
               o.journal, res.inherited, res.inherited == 1 ? "" : "s", res.kept,
               res.kept == 1 ? "" : "s", res.rerun);
    o.journal = NULL; /* the fork's, taken up */
    rc = take_up(&o, rs, "fork", 1);
  }
  ob_unref(o.inputs);
  ob_unref(o.sets);
  free(o.root);
  return rc;
}
