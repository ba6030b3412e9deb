/* main.c -- the `obelus` program: finds the command and hands it its arguments.
 * Each command lives in its own ob_cmd_*.c file; what it printed on stdout is
 * checked once it returns (a lost output is exit 4, OB_EXIT_WRITE). The commands'
 * names, their lines of `obelus --help` and their options are ob_cli_opts.c's table;
 * an unknown command is refused there, with the nearest one (exit 2). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_suggest.h"
#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"

static const char main_intro[] =
    "usage: obelus COMMAND [ARGS]\n"
    "\n"
    "obelus runs plans: JSON lists of tool calls wired together through an\n"
    "append-only message log, every call starting as soon as its inputs exist.\n"
    "\n";

static const char main_outro[] =
    "\n"
    "`obelus COMMAND --help` tells more about each. Options go after the command;\n"
    "--opt=value is --opt value, and -- ends the options (a file named -x after it).\n";

/* `obelus --help`: the intro, the commands' lines from the table, the outro. */
static void main_help(FILE *f) {
  fputs(main_intro, f);
  ob_cli_commands_help(f);
  fputs(main_outro, f);
}

/* `obelus log`: ob_cmd_log_redis with --redis, else ob_cmd_log. Here, the one place
 * that knows both, so that neither command's file calls the other's. */
static int log_command(int argc, char **argv) {
  return ob_cli_args_has(argc, argv, "--redis") ? ob_cmd_log_redis(argc, argv)
                                                : ob_cmd_log(argc, argv);
}

/* `obelus help [COMMAND]`: obelus's help, or COMMAND's (as `obelus COMMAND --help`). */
static int help_command(int argc, char **argv);

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"run", ob_cmd_run},
    {"check", ob_cmd_check},
    {"loop", ob_cmd_loop},
    {"graph", ob_cmd_graph},
    {"resolve", ob_cmd_resolve},
    {"schema", ob_cmd_schema},
    {"log", log_command},
    {"resume", ob_cmd_resume},
    {"fork", ob_cmd_fork},
    {"ui", ob_cmd_ui},
    {"tools", ob_cmd_tools},
    {"init", ob_cmd_init},
    {"mcp", ob_cmd_mcp},
    {"report", ob_cmd_report},
    {"submit", ob_cmd_submit},
    {"worker", ob_cmd_worker},
    {"wait", ob_cmd_wait},
    {"status", ob_cmd_status},
    {"completion", ob_cmd_completion},
    {"help", help_command},
};

/* What a command printed is its result: stdout that could not take it all (a full
 * disk, /dev/full, an I/O error) is exit 4, said on stderr -- unless the command
 * already ended with 4 (run and resume check their output themselves). */
static int finish(const char *cmd, int status) {
  errno = 0;
  if ((fflush(stdout) == EOF || ferror(stdout)) && status != OB_EXIT_WRITE) {
    fprintf(stderr, "obelus %s: cannot write the output to stdout: %s\n", cmd,
            strerror(errno ? errno : EIO));
    return OB_EXIT_WRITE;
  }
  return status;
}

static int dispatch(int argc, char **argv) {
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(argv[0], commands[i].name))
      return finish(argv[0], commands[i].run(argc, argv));
  return ob_cli_unknown_command(argv[0]);
}

static int help_command(int argc, char **argv) {
  ob_cli_args a;
  ob_cli_args_start(&a, argc, argv);
  const char *cmd = NULL;
  int k;
  while ((k = ob_cli_args_next(&a)) > 0)
    if (a.opt && !strcmp(a.opt, "--help"))
      continue;
    else if (!a.opt && !cmd)
      cmd = a.val;
    else
      return ob_cli_usage_error("help", "unexpected argument \"%s\"", a.val);
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!cmd || !strcmp(cmd, "help")) {
    main_help(stdout);
    return OB_EXIT_OK;
  }
  char *args[] = {(char *)cmd, "--help", NULL};
  return dispatch(2, args);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    main_help(stderr);
    return OB_EXIT_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    main_help(stdout);
    return OB_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version")) {
#ifdef OB_GIT_REV /* OB_VERSION and OB_GIT_REV: the Makefile's (VERSION, GIT_REV) */
    puts("obelus " OB_VERSION " (git " OB_GIT_REV ")");
#else
    puts("obelus " OB_VERSION);
#endif
    return OB_EXIT_OK;
  }
  if (argv[1][0] == '-') { /* an option before the command */
    static const char *const top[] = {"--help", "--version"};
    const char *best = ob_suggest(argv[1], top, 2);
    ob_eprintf("obelus: unknown option %s%s%s%s\n(options go after the command: `obelus "
               "--help` lists the commands)\n",
               argv[1], best ? "; did you mean " : "", best ? best : "", best ? "?" : "");
    return OB_EXIT_USAGE;
  }
  return dispatch(argc - 1, argv + 1);
}
