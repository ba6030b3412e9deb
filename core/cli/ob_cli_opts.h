/* ob_cli_opts.h -- the one table of the `obelus` program's commands and their options
 * (ob_cli_opts.c), and the parse every command's options go through: `--opt=value` is
 * `--opt value`, `--` ends the options, an unknown command or option is refused with the
 * nearest known one, an option without its value is named. `obelus --help`, the
 * completions (`obelus completion`, ob_cmd_completion.c) and every parser read it. */
#ifndef OB_CLI_OPTS_H
#define OB_CLI_OPTS_H

#include <stdint.h>
#include <stdio.h>

/* A command: `obelus NAME ARGS...`. */
typedef struct ob_cli_cmd {
  const char *name;
  const char *usage;   /* its line in `obelus --help`, after the name */
  const char *summary; /* what it does, in a few words */
  const char *args;    /* how its words other than options complete: "file", "dir", a list
                          of words ("bash zsh json"), "@commands", or NULL: none */
  int fleet;           /* listed under "many machines" in `obelus --help` */
  const char *fleet_usage, *fleet_summary; /* a second line there (log --redis), or NULL */
} ob_cli_cmd;

/* An option, of the commands in cmds (a bit per command, in the commands' order). One
 * name may have several rows, for commands where it means something else (--format). */
typedef struct ob_cli_opt {
  const char *name;     /* "--tools" */
  const char *alias;    /* "-o", or NULL */
  const char *value;    /* the name of its value ("PATH"), or NULL: a flag, it takes none */
  const char *complete; /* how the value completes: "@tools" (.lua files and folders),
                           "@file", "@dir", a list of words, or NULL: nothing to offer */
  const char *help;     /* one line */
  uint32_t cmds;
} ob_cli_opt;

/* The tables, in order; `obelus --help` and the completions list them so. */
const ob_cli_cmd *ob_cli_cmds(size_t *n);
const ob_cli_opt *ob_cli_opts(size_t *n);

/* The command named name, or NULL. */
const ob_cli_cmd *ob_cli_cmd_find(const char *name);

/* 1 when option o belongs to command c. */
int ob_cli_opt_of(const ob_cli_opt *o, const ob_cli_cmd *c);

/* Says on stderr that word is no command, with the nearest one and where the list is;
 * returns 2 (a usage error). */
int ob_cli_unknown_command(const char *word);

/* The commands' lines of `obelus --help`, in two groups, written to f. */
void ob_cli_commands_help(FILE *f);

/* Walks a command's arguments (argv[0] its name, as main hands it) one at a time, by
 * the table: each option (opt its name as the table spells it: "--output" for -o,
 * "--help" for -h; val its value or NULL) or argument (opt NULL, val the word). A word
 * after `--`, or that does not begin with '-', or "-" alone, is an argument; the word
 * after an option that takes a value is that value, whatever it looks like. Unknown
 * options, a missing value and a value given to a flag are said on stderr (nothing,
 * when quiet) and end the walk. A command the table does not know takes any --opt as
 * a flag (an in-process call of a parser under another name). */
typedef struct ob_cli_args {
  const ob_cli_cmd *cmd;
  const char *cmdname;
  int argc, i, rest, quiet;
  char **argv;
  const char *opt, *val;
} ob_cli_args;

void ob_cli_args_start(ob_cli_args *a, int argc, char **argv);
/* 1: one more (a->opt, a->val); 0: no more; -1: a usage error (said unless quiet). */
int ob_cli_args_next(ob_cli_args *a);

/* 1 when argv (a command's, as above) holds option opt, taken as the walk takes it
 * (not a value of another option, nor a word after --); nothing said. */
int ob_cli_args_has(int argc, char **argv, const char *opt);

/* An option the table gives cmd that its parser does not handle (a bug: the table and
 * the parser disagree): said on stderr; returns 2. */
int ob_cli_args_unhandled(const ob_cli_args *a);

#endif
