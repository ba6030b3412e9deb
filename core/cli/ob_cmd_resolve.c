/* ob_cmd_resolve.c -- `obelus resolve FILE EXPR [--at N] [--instance X]`:
 * what does my plan see? Prints the value of a reference expression over a log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "log/ob_journal.h"

static const char resolve_help[] =
    "usage: obelus resolve FILE EXPR [--at N] [--instance X]\n"
    "\n"
    "Prints, as JSON, the value of the reference expression EXPR over the log in\n"
    "FILE (a JSON array of messages, or a journal: JSON Lines; - reads standard\n"
    "input). Exit 0 when the value is present, 1 when it is absent (nothing\n"
    "printed), 2 when EXPR is malformed (the character position is given) or\n"
    "FILE is unusable.\n"
    "\n"
    "  --at N         read the log as it was after its first N messages\n"
    "  --instance X   read instance X's view (global deep-merged with X's own)\n"
    "\n"
    "examples:\n"
    "  obelus resolve plans/log.json '\xE2\x80\xA0" "data.user.status'\n"
    "  obelus resolve run.jsonl '\xE2\x80\xA0state.receipt || \xE2\x80\xA0state.error' --at 5\n"
    "  obelus resolve run.jsonl '\xE2\x80\xA0input.lang' --instance fr\n";

/* Shows where a malformed expression went wrong: the text, then a caret. */
static void show_position(const char *expr, size_t pos) {
  size_t chars = 0;
  fprintf(stderr, "  %s\n  ", expr);
  for (const char *p = expr; *p && chars < pos; p++)
    if (((unsigned char)*p & 0xC0) != 0x80 && ++chars <= pos)
      fputc(' ', stderr);
  fputs("^\n", stderr);
}

int ob_cmd_resolve(int argc, char **argv) {
  const char *file = NULL, *expr = NULL, *instance = NULL;
  size_t at = OB_LOG_NOW;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int more;
  while ((more = ob_cli_args_next(&args)) > 0) {
    const char *a = args.opt, *val = args.val;
    if (!a) {
      if (!file)
        file = val;
      else if (!expr)
        expr = val;
      else
        return ob_cli_usage_error("resolve", "unexpected argument \"%s\"", val);
    } else if (!strcmp(a, "--help")) {
      fputs(resolve_help, stdout);
      return OB_EXIT_OK;
    } else if (!strcmp(a, "--at")) {
      if (!ob_cli_parse_count(val, &at))
        return ob_cli_usage_error("resolve", "--at needs a message count (0 or more)");
    } else if (!strcmp(a, "--instance")) {
      instance = val;
    } else {
      return ob_cli_args_unhandled(&args);
    }
  }
  if (more < 0)
    return OB_EXIT_USAGE;
  if (!file || !expr)
    return ob_cli_usage_error("resolve", "needs FILE and EXPR");

  /* a log's keys are JSON text, UTF-8: a key that is not could only ever be absent */
  size_t elen = strlen(expr);
  for (size_t k = 0; k < elen;) {
    const unsigned char *u = (const unsigned char *)expr + k;
    size_t len = *u < 0x80 ? 1 : ob_utf8_seq(u, elen - k);
    if (!len) {
      ob_eprintf("obelus resolve: malformed expression: byte %zu (0x%02x) is not "
                 "UTF-8 (a log's keys are JSON text, UTF-8)\n", k + 1, *u);
      return OB_EXIT_USAGE;
    }
    k += len;
  }
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(expr, elen, OB_EXPR_INPUT, &e, &err) != OB_OK) {
    ob_eprintf("obelus resolve: malformed expression: %s\n", err.msg);
    show_position(expr, err.pos);
    return OB_EXIT_USAGE;
  }
  ob_log *log = ob_log_new();
  int status;
  ob_journal_info info;
  if (ob_journal_load(log, file, &info, &err) != OB_OK) {
    ob_eprintf("obelus resolve: %s\n", err.msg);
    status = OB_EXIT_USAGE;
  } else {
    ob_cli_report_torn("obelus resolve", file, &info);
    ob_value *v = ob_log_eval(log, &e, instance, at);
    status = v ? OB_EXIT_OK : OB_EXIT_FAIL;
    if (v) {
      size_t len;
      char *text = ob_json_print(v, OB_JSON_COMPACT, &len);
      fwrite(text, 1, len, stdout);
      fputc('\n', stdout);
      free(text);
      ob_unref(v);
    }
  }
  ob_expr_free(&e);
  ob_log_free(log);
  return status;
}
