/* ob_cli.h -- the commands of the `obelus` program, one function each, and the
 * small helpers they share (usage errors, option parsing). */
#ifndef OB_CLI_H
#define OB_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "base/ob_error.h" /* OB_ESC_LINES */

/* Exit statuses (plan-format §12). */
enum { OB_EXIT_OK = 0, OB_EXIT_FAIL = 1, OB_EXIT_USAGE = 2,
       OB_EXIT_UNAVAILABLE = 3, /* the queue's Redis cannot be reached */
       OB_EXIT_TIMEOUT = 4,     /* `wait --timeout` passed before every job finished */
       OB_EXIT_WRITE = 4 };     /* the journal, the output (stdout, report -o) or
                                   --events could not be written (disk full, I/O error) */

/* Each takes argv with argv[0] the command's name and returns an exit status. */
int ob_cmd_resolve(int argc, char **argv);
/* `obelus schema SCHEMA.json INSTANCE.json` (argv[0] is "schema"). Exit status:
 * 0 valid (prints "valid"), 1 invalid (prints each failure on stdout, one a line,
 * as ob_schema_failure_write does), 2 bad usage, an unreadable or malformed
 * file or an unusable schema (message on stderr naming the file). */
int ob_cmd_schema(int argc, char **argv);
int ob_cmd_run(int argc, char **argv);
int ob_cmd_check(int argc, char **argv);
int ob_cmd_loop(int argc, char **argv);
int ob_cmd_graph(int argc, char **argv);
int ob_cmd_log(int argc, char **argv);
int ob_cmd_resume(int argc, char **argv);
int ob_cmd_fork(int argc, char **argv);
int ob_cmd_ui(int argc, char **argv);
int ob_cmd_tools(int argc, char **argv);
int ob_cmd_init(int argc, char **argv);
int ob_cmd_mcp(int argc, char **argv);
int ob_cmd_report(int argc, char **argv);
int ob_cmd_submit(int argc, char **argv);
int ob_cmd_worker(int argc, char **argv);
int ob_cmd_wait(int argc, char **argv);
int ob_cmd_status(int argc, char **argv);
/* `obelus completion bash|zsh|json` (ob_cmd_completion.c). */
int ob_cmd_completion(int argc, char **argv);
/* `obelus log --redis URL JOB`: the job's journal fetched, then printed by ob_cmd_log. */
int ob_cmd_log_redis(int argc, char **argv);
/* An ob_watch_say_fn: "<ud>: <msg>\n" on standard error with write(2) (it runs on
 * the watchdog's thread while the loop thread is stuck); ud: "obelus run" and such. */
void ob_cli_say_stuck(void *ud, const char *msg);
/* A torn last line of a journal the command read, said on standard error
 * (ob_journal_torn_text); nothing when none was torn. */
struct ob_journal_info;
/* --approve's hook (ob_run_options.approve): asks on /dev/tty, y/n/e ($EDITOR) (ob_cli_approve.c). */
struct ob_approve_ask;
struct ob_value;
struct ob_buf;
int ob_cli_approve_tty(void *ud, const struct ob_approve_ask *q, struct ob_value **replacement,
                       struct ob_buf *why);
/* s written to f escaped (ob_error.h: OB_ESC_LINES keeps newlines and tabs). */
void ob_fputs_escaped(FILE *f, const char *s, size_t len, int flags);
/* printf-style, the result written escaped (OB_ESC_LINES) to stderr: the CLI's messages
 * that carry text a plan, a tool or a journal controls. */
void ob_eprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Says a note on stderr as the engine used to print it: "obelus: MSG" escaped
 * (OB_ESC_LINES); kind "rerun": "obelus resume: MSG"; kind "warning" (a tool's warn()):
 * "Lua warning: MSG" as is. */
void ob_cli_say_note(const char *kind, const char *msg);
/* The engine's note hook (ob_engine_set_note) of every command: "obelus: MSG" on stderr,
 * escaped (OB_ESC_LINES), the progress line erased first. */
void ob_cli_note(void *ud, const char *kind, const char *call_id, const char *msg);
void ob_cli_report_torn(const char *who, const char *path, const struct ob_journal_info *info);

/* Prints "obelus CMD: <message>" and a hint to stderr; returns OB_EXIT_USAGE. */
int ob_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1 when s is a whole non-negative decimal number that fits in size_t. */
int ob_cli_parse_count(const char *s, size_t *out);
/* 1 when s is a duration: a number of seconds, or one followed by s, m, h or d (90s,
 * 30m, 1h, 7d), into *secs; "forever" is UINT64_MAX. */
int ob_cli_parse_duration(const char *s, uint64_t *secs);

/* SIGINT and SIGTERM taken on loop (sig[0], sig[1]; their data is data): cb for each.
 * Unreferenced when weak (they never keep the loop alive). A tool that never yields is
 * stopped for the loop to take the signal, the hard-th signal exits at once
 * (ob_watch_catch_signals), and a tool a stop cannot reach ends the process, saying so
 * as who (a string that stays). ob_cli_signals_close closes both. */
void ob_cli_signals(uv_loop_t *loop, uv_signal_t sig[2], uv_signal_cb cb, void *data, int weak,
                    int hard, const char *who);
void ob_cli_signals_close(uv_signal_t sig[2]);

/* The files engine e's tools write to (ob_cli_stdio.c): Lua's print, io.write and
 * io.output(), io.stdout over out, io.stderr over err (NULL keeps that one). Before the
 * tools load; both stay open until the engine is freed, and a tool cannot close them. */
struct ob_engine;
void ob_cli_engine_stdio(struct ob_engine *e, FILE *out, FILE *err);

#endif
