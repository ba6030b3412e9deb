/* ob_cmd_schema.c -- `obelus schema SCHEMA.json INSTANCE.json`: does this JSON satisfy
 * this JSON Schema (draft-07)? Exit 0 valid, 1 invalid (each failure listed), 2 unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "base/ob_schema.h"

static const char schema_help[] =
    "usage: obelus schema SCHEMA.json INSTANCE.json\n"
    "\n"
    "Validates the JSON in INSTANCE.json against the JSON Schema (draft-07) in\n"
    "SCHEMA.json, the way obelus checks tool params. Exit 0 and prints \"valid\"\n"
    "when it conforms; exit 1 and prints one line per failure, as\n"
    "  INSTANCE-PATH: KEYWORD: WHAT\n"
    "(the path is a JSON pointer, \"(root)\" for the whole value); exit 2 when a\n"
    "file cannot be read or parsed, or the schema is unusable (a keyword of the\n"
    "wrong type, an invalid pattern, a $ref that leads nowhere).\n"
    "\n"
    "example:\n"
    "  obelus schema tool-schema.json params.json\n";

/* Same shape as the other commands' usage errors; kept here so the library
 * needs nothing from main.c. */
static int usage_error(const char *what) {
  fprintf(stderr, "obelus schema: %s\n(try `obelus schema --help`)\n", what);
  return 2;
}

/* The parser's message already names the file; prefix it only when not. */
static void file_error(const char *file, const ob_error *err) {
  if (strncmp(err->msg, file, strlen(file)) == 0)
    fprintf(stderr, "obelus schema: %s\n", err->msg);
  else
    fprintf(stderr, "obelus schema: %s: %s\n", file, err->msg);
}

int ob_cmd_schema(int argc, char **argv) {
  const char *files[2] = {NULL, NULL};
  int nfiles = 0;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&args)) > 0) {
    if (args.opt && !strcmp(args.opt, "--help")) {
      fputs(schema_help, stdout);
      return 0;
    }
    if (args.opt)
      return ob_cli_args_unhandled(&args);
    if (nfiles == 2)
      return usage_error("takes exactly two files: SCHEMA.json INSTANCE.json");
    files[nfiles++] = args.val;
  }
  if (k < 0)
    return 2;
  if (nfiles < 2)
    return usage_error("needs SCHEMA.json and INSTANCE.json");

  ob_error err = {0, 0, ""};
  ob_value *schema_value = ob_json_parse_file(files[0], &err);
  if (!schema_value) {
    file_error(files[0], &err);
    return 2;
  }
  ob_schema *s = ob_schema_compile(schema_value, &err);
  ob_unref(schema_value); /* the compiled schema keeps its own reference */
  if (!s) {
    fprintf(stderr, "obelus schema: %s: unusable schema: %s\n", files[0], err.msg);
    return 2;
  }
  ob_value *instance = ob_json_parse_file(files[1], &err);
  if (!instance) {
    file_error(files[1], &err);
    ob_schema_free(s);
    return 2;
  }

  ob_schema_result r;
  int valid = ob_schema_validate(s, instance, &r);
  if (valid) {
    puts("valid");
  } else {
    ob_buf line;
    ob_buf_init(&line);
    for (size_t i = 0; i < r.n; i++) {
      ob_schema_failure_write(&line, &r.fail[i]);
      ob_buf_addc(&line, '\n');
    }
    if (line.data)
      fwrite(line.data, 1, line.len, stdout);
    ob_buf_free(&line);
  }
  ob_schema_result_free(&r);
  ob_unref(instance);
  ob_schema_free(s);
  return valid ? 0 : 1;
}
