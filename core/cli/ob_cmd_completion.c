/* ob_cmd_completion.c -- `obelus completion bash|zsh|json`: the shells' completion
 * scripts, written from the table of commands and options (ob_cli_opts.c), or that
 * table as JSON for other tools.
 *
 * Design
 * ------
 * A script holds everything it offers as data: the commands (with their summaries, for
 * zsh), each command's options (with their one-line help, for zsh), and how each
 * option's value completes, as case branches keyed by "COMMAND OPTION" (the same name
 * completes differently for graph, tools and log: --format). So completing never runs
 * obelus, and what is offered is what the parser takes: both are the table. Besides
 * the values: --opt=value (bash splits the word at '=', zsh does not), and after `--`
 * only arguments. The arguments of a command complete as the table says: files, folders
 * (init), a few words (completion), or the commands (help).
 * completions/obelus.bash and completions/_obelus are this command's output, checked
 * in so that `make install` and the package need no obelus to build them; `make
 * completions` writes them again and spec/cli/cli_opts_spec.lua fails when they differ.
 *
 * Costs: a few KB written, a pass over the table per command. */
#include <stdio.h>
#include <string.h>

#include "base/ob_buf.h"
#include "base/ob_value.h"
#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "cli/ob_runner.h"

static const char completion_help[] =
    "usage: obelus completion bash|zsh|json\n"
    "\n"
    "Prints a completion script for the shell, made from the table of commands and\n"
    "options the command line itself parses with: commands, each command's options,\n"
    "the values of those that take a few (--fsync, --format), .lua files and folders\n"
    "for --tools, files for the rest. json prints the table: each command's name,\n"
    "usage, summary and options (name, alias, value, complete, help).\n"
    "The package installs both scripts already; for a build of your own:\n"
    "\n"
    "  obelus completion bash > ~/.local/share/bash-completion/completions/obelus\n"
    "  obelus completion zsh > ~/.zfunc/_obelus    # with fpath+=(~/.zfunc) in .zshrc\n";

/* Is this the kind of completion c ("@file", a word list)? */
static int is(const char *c, const char *kind) { return c && !strcmp(c, kind); }

/* The distinct value completions of the table, in order of first use: "" for none. */
static size_t value_kinds(const char **kinds, size_t max) {
  size_t nopts, n = 0;
  const ob_cli_opt *opts = ob_cli_opts(&nopts);
  for (size_t i = 0; i < nopts; i++) {
    if (!opts[i].value)
      continue;
    const char *k = opts[i].complete ? opts[i].complete : "";
    size_t j = 0;
    while (j < n && strcmp(kinds[j], k))
      j++;
    if (j == n && n < max)
      kinds[n++] = k;
  }
  return n;
}

static const char *kind_of(const ob_cli_opt *o) { return o->complete ? o->complete : ""; }

/* 1 when every row named as opts[i] completes its value alike. */
static int one_kind(const ob_cli_opt *opts, size_t nopts, size_t i) {
  for (size_t j = 0; j < nopts; j++)
    if (!strcmp(opts[j].name, opts[i].name) && strcmp(kind_of(&opts[j]), kind_of(&opts[i])))
      return 0;
  return 1;
}

/* The case patterns of the options whose value completes as kind, against "CMD OPT":
 * "*' --tools'" for a name that completes alike for every command, "'graph --format'"
 * for one whose completion depends on the command. */
static void value_patterns(ob_buf *b, const char *kind) {
  size_t ncmds, nopts, k = 0;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  const ob_cli_opt *opts = ob_cli_opts(&nopts);
  for (size_t i = 0; i < nopts; i++) {
    const ob_cli_opt *o = &opts[i];
    if (!o->value || strcmp(kind_of(o), kind))
      continue;
    if (one_kind(opts, nopts, i)) {
      size_t j = 0;
      while (strcmp(opts[j].name, o->name)) /* its first row says it */
        j++;
      if (j < i)
        continue;
      ob_buf_addf(b, "%s*' %s'", k++ ? "|" : "    ", o->name);
      if (o->alias)
        ob_buf_addf(b, "|*' %s'", o->alias);
      continue;
    }
    for (size_t c = 0; c < ncmds; c++)
      if (ob_cli_opt_of(o, &cmds[c])) {
        ob_buf_addf(b, "%s'%s %s'", k++ ? "|" : "    ", cmds[c].name, o->name);
        if (o->alias)
          ob_buf_addf(b, "|'%s %s'", cmds[c].name, o->alias);
      }
  }
}

/* The names of the commands whose arguments complete as kind, "a|b|c". */
static int arg_patterns(ob_buf *b, const char *kind) {
  size_t ncmds, k = 0;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  for (size_t c = 0; c < ncmds; c++)
    if (cmds[c].args && !strcmp(cmds[c].args, kind))
      ob_buf_addf(b, "%s%s", k++ ? "|" : "    ", cmds[c].name);
  return k > 0;
}

/* s in single quotes for a shell. */
static void quoted(ob_buf *b, const char *s) {
  ob_buf_addc(b, '\'');
  for (; *s; s++)
    if (*s == '\'')
      ob_buf_addf(b, "'\\''");
    else
      ob_buf_addc(b, *s);
  ob_buf_addc(b, '\'');
}

static void command_words(ob_buf *b) {
  size_t ncmds;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  for (size_t c = 0; c < ncmds; c++)
    ob_buf_addf(b, "%s%s", c ? " " : "", cmds[c].name);
}

/* Option i is the first row of its name that command c takes (a name with a row per
 * meaning, --format, completes once). */
static int first_of_name(const ob_cli_opt *opts, size_t i, const ob_cli_cmd *c) {
  if (!ob_cli_opt_of(&opts[i], c))
    return 0;
  for (size_t j = 0; j < i; j++)
    if (ob_cli_opt_of(&opts[j], c) && !strcmp(opts[j].name, opts[i].name))
      return 0;
  return 1;
}

/* What a shell does for a kind of value: a .lua file or folder, a file, a folder, one
 * of the words (printf format, %s the words), nothing; then what ends each arm. */
typedef struct shell_acts {
  const char *tools, *file, *dir, *words, *none, *end;
} shell_acts;

/* The `case "$cmd $prev"` arms: for each kind of value, its options' patterns and the
 * shell's action. */
static void value_cases(ob_buf *b, const shell_acts *a) {
  const char *kinds[32];
  size_t nkinds = value_kinds(kinds, 32);
  for (size_t k = 0; k < nkinds; k++) {
    value_patterns(b, kinds[k]);
    ob_buf_addf(b, ")\n      ");
    if (is(kinds[k], "@tools"))
      ob_buf_addf(b, "%s", a->tools);
    else if (is(kinds[k], "@file"))
      ob_buf_addf(b, "%s", a->file);
    else if (is(kinds[k], "@dir"))
      ob_buf_addf(b, "%s", a->dir);
    else if (*kinds[k])
      ob_buf_addf(b, a->words, kinds[k]);
    else
      ob_buf_addf(b, "%s", a->none);
    ob_buf_addf(b, "%s", a->end);
  }
}

static const char header[] =
    "# completions/%s -- %s completion for obelus, written by `obelus completion %s`\n"
    "# from the table of commands and options the command line parses with\n"
    "# (core/cli/ob_cli_opts.c): do not edit; `make completions` writes it again.\n"
    "# `make install` puts it in %s.\n";

static void bash_script(ob_buf *b) {
  size_t ncmds, nopts;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  const ob_cli_opt *opts = ob_cli_opts(&nopts);
  ob_buf_addf(b, header, "obelus.bash", "bash", "bash",
              "share/bash-completion/completions/obelus");
  ob_buf_addf(b, "_obelus() {\n"
                 "  local cur prev cmd pre= rest= i w\n"
                 "  cur=${COMP_WORDS[COMP_CWORD]}\n"
                 "  prev=${COMP_WORDS[COMP_CWORD-1]}\n"
                 "  cmd=${COMP_WORDS[1]}\n"
                 "  COMPREPLY=()\n"
                 "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
                 "    COMPREPLY=( $(compgen -W \"");
  command_words(b);
  ob_buf_addf(b, " --help --version\" -- \"$cur\") )\n"
                 "    return 0\n"
                 "  fi\n"
                 "  # --opt=value: bash cuts the word at '=' (COMP_WORDBREAKS), or not\n"
                 "  if [ \"$cur\" = = ]; then\n"
                 "    cur=\n"
                 "  elif [ \"$prev\" = = ] && [ \"$COMP_CWORD\" -gt 2 ]; then\n"
                 "    prev=${COMP_WORDS[COMP_CWORD-2]}\n"
                 "  elif [[ $cur == --*=* ]]; then\n"
                 "    prev=${cur%%%%=*} pre=${cur%%%%=*}= cur=${cur#*=}\n"
                 "  fi\n"
                 "  # after --, arguments only\n"
                 "  for ((i = 2; i < COMP_CWORD; i++)); do\n"
                 "    [ \"${COMP_WORDS[i]}\" = -- ] && rest=1\n"
                 "  done\n"
                 "  if [ -z \"$rest\" ]; then\n"
                 "    case \"$cmd $prev\" in\n");
  value_cases(b, &(shell_acts){
    .tools = "compopt -o filenames 2>/dev/null\n"
             "      COMPREPLY=( $(compgen -d -- \"$cur\") $(compgen -f -X '!*.lua' -- \"$cur\") )",
    .file = "compopt -o filenames 2>/dev/null\n      COMPREPLY=( $(compgen -f -- \"$cur\") )",
    .dir = "compopt -o filenames 2>/dev/null\n      COMPREPLY=( $(compgen -d -- \"$cur\") )",
    .words = "COMPREPLY=( $(compgen -W \"%s\" -- \"$cur\") )",
    .none = "COMPREPLY=()",
    .end = "\n      COMPREPLY=( \"${COMPREPLY[@]/#/$pre}\" )\n      return 0 ;;\n"});
  ob_buf_addf(b, "    esac\n"
                 "    if [[ $cur == -* ]]; then\n"
                 "      case $cmd in\n");
  for (size_t c = 0; c < ncmds; c++) {
    ob_buf_addf(b, "        %s) w=\"", cmds[c].name);
    int first = 1;
    for (size_t i = 0; i < nopts; i++)
      if (first_of_name(opts, i, &cmds[c]))
        ob_buf_addf(b, "%s%s", first ? "" : " ", opts[i].name), first = 0;
    ob_buf_addf(b, "\" ;;\n");
  }
  ob_buf_addf(b, "      esac\n"
                 "      COMPREPLY=( $(compgen -W \"$w\" -- \"$cur\") )\n"
                 "      return 0\n"
                 "    fi\n"
                 "  fi\n"
                 "  case $cmd in\n");
  if (arg_patterns(b, "file"))
    ob_buf_addf(b, ")\n      compopt -o filenames 2>/dev/null\n"
                   "      COMPREPLY=( $(compgen -f -- \"$cur\") ) ;;\n");
  if (arg_patterns(b, "dir"))
    ob_buf_addf(b, ")\n      compopt -o filenames 2>/dev/null\n"
                   "      COMPREPLY=( $(compgen -d -- \"$cur\") ) ;;\n");
  for (size_t c = 0; c < ncmds; c++) {
    const char *a = cmds[c].args;
    if (!a || !strcmp(a, "file") || !strcmp(a, "dir"))
      continue;
    ob_buf_addf(b, "    %s)\n      COMPREPLY=( $(compgen -W \"", cmds[c].name);
    if (!strcmp(a, "@commands"))
      command_words(b);
    else
      ob_buf_addf(b, "%s", a);
    ob_buf_addf(b, "\" -- \"$cur\") ) ;;\n");
  }
  ob_buf_addf(b, "  esac\n"
                 "  return 0\n"
                 "}\n"
                 "complete -F _obelus obelus\n");
}

static void zsh_script(ob_buf *b) {
  size_t ncmds, nopts;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  const ob_cli_opt *opts = ob_cli_opts(&nopts);
  ob_buf_addf(b, "#compdef obelus\n");
  ob_buf_addf(b, header, "_obelus", "zsh", "zsh", "share/zsh/site-functions/_obelus");
  ob_buf_addf(b, "_obelus() {\n"
                 "  local -a cmds opts\n"
                 "  local cur=${words[CURRENT]} prev=${words[CURRENT-1]} cmd=${words[2]} rest= i\n"
                 "  cmds=(\n");
  for (size_t c = 0; c < ncmds; c++) {
    ob_buf_addf(b, "    ");
    ob_buf tmp = {0};
    ob_buf_addf(&tmp, "%s:%s", cmds[c].name, cmds[c].summary);
    quoted(b, tmp.data);
    ob_buf_free(&tmp);
    ob_buf_addc(b, '\n');
  }
  ob_buf_addf(b, "  )\n"
                 "  if (( CURRENT == 2 )); then\n"
                 "    if [[ $cur == -* ]]; then compadd -- --help --version; else _describe "
                 "'command' cmds; fi\n"
                 "    return\n"
                 "  fi\n"
                 "  # --opt=value in one word\n"
                 "  if [[ $cur == --*=* ]]; then\n"
                 "    prev=${cur%%%%=*}\n"
                 "    compset -P '*='\n"
                 "  fi\n"
                 "  # after --, arguments only\n"
                 "  for (( i = 3; i < CURRENT; i++ )); do\n"
                 "    [[ ${words[i]} == -- ]] && rest=1\n"
                 "  done\n"
                 "  if [[ -z $rest ]]; then\n"
                 "    case \"$cmd $prev\" in\n");
  value_cases(b, &(shell_acts){
    .tools = "_alternative 'files:tool file:_files -g \"*.lua\"' 'dirs:folder:_files -/'",
    .file = "_files",
    .dir = "_files -/",
    .words = "compadd -- %s",
    .none = ":",
    .end = "\n      return ;;\n"});
  ob_buf_addf(b, "    esac\n"
                 "    if [[ $cur == -* ]]; then\n"
                 "      case $cmd in\n");
  for (size_t c = 0; c < ncmds; c++) {
    ob_buf_addf(b, "        %s) opts=(\n", cmds[c].name);
    for (size_t i = 0; i < nopts; i++)
      if (first_of_name(opts, i, &cmds[c])) {
        ob_buf tmp = {0};
        ob_buf_addf(&tmp, "%s:%s", opts[i].name, opts[i].help);
        ob_buf_addf(b, "          ");
        quoted(b, tmp.data);
        ob_buf_addc(b, '\n');
        ob_buf_free(&tmp);
      }
    ob_buf_addf(b, "          ) ;;\n");
  }
  ob_buf_addf(b, "      esac\n"
                 "      _describe 'option' opts\n"
                 "      return\n"
                 "    fi\n"
                 "  fi\n"
                 "  case $cmd in\n");
  if (arg_patterns(b, "file"))
    ob_buf_addf(b, ") _files ;;\n");
  if (arg_patterns(b, "dir"))
    ob_buf_addf(b, ") _files -/ ;;\n");
  for (size_t c = 0; c < ncmds; c++) {
    const char *a = cmds[c].args;
    if (!a || !strcmp(a, "file") || !strcmp(a, "dir"))
      continue;
    if (!strcmp(a, "@commands"))
      ob_buf_addf(b, "    %s) _describe 'command' cmds ;;\n", cmds[c].name);
    else
      ob_buf_addf(b, "    %s) compadd -- %s ;;\n", cmds[c].name, a);
  }
  ob_buf_addf(b, "  esac\n"
                 "}\n"
                 "_obelus \"$@\"\n");
}

static ob_value *str_or_null(const char *s) { return s ? ob_cstring(s) : ob_null(); }

/* {"commands": [{name, usage, summary, args, options: [{name, alias, value, complete,
 *  help}]}], "options": ["--help", "--version"]} (the latter: before any command). */
static ob_value *table_json(void) {
  size_t ncmds, nopts;
  const ob_cli_cmd *cmds = ob_cli_cmds(&ncmds);
  const ob_cli_opt *opts = ob_cli_opts(&nopts);
  ob_value *list = ob_array();
  for (size_t c = 0; c < ncmds; c++) {
    ob_value *o = ob_object();
    o = ob_object_set(o, "name", 4, ob_cstring(cmds[c].name));
    o = ob_object_set(o, "usage", 5, ob_cstring(cmds[c].usage));
    o = ob_object_set(o, "summary", 7, ob_cstring(cmds[c].summary));
    o = ob_object_set(o, "args", 4, str_or_null(cmds[c].args));
    ob_value *ol = ob_array();
    for (size_t i = 0; i < nopts; i++) {
      if (!ob_cli_opt_of(&opts[i], &cmds[c]))
        continue;
      ob_value *p = ob_object();
      p = ob_object_set(p, "name", 4, ob_cstring(opts[i].name));
      p = ob_object_set(p, "alias", 5, str_or_null(opts[i].alias));
      p = ob_object_set(p, "value", 5, str_or_null(opts[i].value));
      p = ob_object_set(p, "complete", 8, str_or_null(opts[i].complete));
      p = ob_object_set(p, "help", 4, ob_cstring(opts[i].help));
      ol = ob_array_push(ol, p);
    }
    o = ob_object_set(o, "options", 7, ol);
    list = ob_array_push(list, o);
  }
  ob_value *top = ob_array_push(ob_array_push(ob_array(), ob_cstring("--help")),
                                ob_cstring("--version"));
  ob_value *t = ob_object_set(ob_object(), "commands", 8, list);
  return ob_object_set(t, "options", 7, top);
}

int ob_cmd_completion(int argc, char **argv) {
  ob_cli_args a;
  ob_cli_args_start(&a, argc, argv);
  const char *shell = NULL;
  int k;
  while ((k = ob_cli_args_next(&a)) > 0) {
    if (a.opt && !strcmp(a.opt, "--help")) {
      fputs(completion_help, stdout);
      return OB_EXIT_OK;
    } else if (a.opt) {
      return ob_cli_args_unhandled(&a);
    } else if (!shell) {
      shell = a.val;
    } else {
      return ob_cli_usage_error("completion", "unexpected argument \"%s\"", a.val);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!shell)
    return ob_cli_usage_error("completion", "needs a shell: bash, zsh or json");
  if (!strcmp(shell, "json")) {
    ob_value *t = table_json();
    int rc = ob_cmd_print_json(t);
    ob_unref(t);
    return rc;
  }
  ob_buf b = {0};
  if (!strcmp(shell, "bash"))
    bash_script(&b);
  else if (!strcmp(shell, "zsh"))
    zsh_script(&b);
  else
    return ob_cli_usage_error("completion", "knows bash, zsh and json, not \"%s\"", shell);
  fwrite(b.data, 1, b.len, stdout);
  ob_buf_free(&b);
  return OB_EXIT_OK;
}
