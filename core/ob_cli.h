/* ob_cli.h -- the commands of the `obelus` program, one function each, and the
 * small helpers they share (usage errors, option parsing). */
#ifndef OB_CLI_H
#define OB_CLI_H

#include <stddef.h>

/* Exit statuses (SPEC 8). */
enum { OB_EXIT_OK = 0, OB_EXIT_FAIL = 1, OB_EXIT_USAGE = 2 };

/* Each takes argv with argv[0] the command's name and returns an exit status. */
int ob_cmd_resolve(int argc, char **argv);
int ob_cmd_schema(int argc, char **argv);
int ob_cmd_run(int argc, char **argv);
int ob_cmd_check(int argc, char **argv);
int ob_cmd_loop(int argc, char **argv);
int ob_cmd_graph(int argc, char **argv);
int ob_cmd_log(int argc, char **argv);
int ob_cmd_resume(int argc, char **argv);

/* Prints "obelus CMD: <message>" and a hint to stderr; returns OB_EXIT_USAGE. */
int ob_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1 when s is a whole non-negative decimal number that fits in size_t. */
int ob_cli_parse_count(const char *s, size_t *out);

#endif
