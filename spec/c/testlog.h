/* testlog.h -- shorthands for log tests: build a log from JSON text, read an
 * expression back as compact JSON text. */
#ifndef OB_TESTLOG_H
#define OB_TESTLOG_H

#include "log/ob_log.h"
#include "test.h"

/* Appends every message of a JSON array; returns the number that failed. */
static int append_all(ob_log *log, const char *json, ob_error *last_err) {
  ob_error err;
  ob_value *msgs = ob_json_parse(json, strlen(json), &err);
  if (!msgs) {
    fprintf(stderr, "  bad test JSON: %s\n", err.msg);
    abort();
  }
  int failed = 0;
  for (size_t i = 0; i < ob_array_len(msgs); i++)
    if (ob_log_append(log, ob_array_get(msgs, i), last_err ? last_err : &err) < 0)
      failed++;
  ob_unref(msgs);
  return failed;
}

static ob_log *log_of(const char *json) {
  ob_log *log = ob_log_new();
  ob_error err;
  if (append_all(log, json, &err)) {
    fprintf(stderr, "  append failed: %s\n", err.msg);
    abort();
  }
  return log;
}

/* The expression's value as compact JSON in a static buffer, or "absent". */
static const char *read_as(ob_log *log, const char *expr, const char *instance, size_t at) {
  static char out[4096];
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(expr, strlen(expr), OB_EXPR_INPUT, &e, &err) != OB_OK) {
    snprintf(out, sizeof out, "syntax error: %s", err.msg);
    return out;
  }
  ob_value *v = ob_log_eval(log, &e, instance, at);
  ob_expr_free(&e);
  if (!v)
    return "absent";
  char *s = ob_json_print(v, OB_JSON_COMPACT, NULL);
  snprintf(out, sizeof out, "%s", s);
  free(s);
  ob_unref(v);
  return out;
}

static const char *read_now(ob_log *log, const char *expr) {
  return read_as(log, expr, NULL, OB_LOG_NOW);
}

#endif
