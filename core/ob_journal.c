/* ob_journal.c -- reading a log back from a file: a JSON array of messages or
 * JSON Lines (a journal: ob_record.c writes it).
 *
 * A journal's lines are messages and records; a record is an object with a
 * "journal" member, and readers of the log skip it: `--at N` counts messages
 * only. A last line without its newline that does not parse is torn (the
 * process died while writing it): reported on stderr and ignored. Any other line that is not
 * JSON is an error naming the line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ob_journal.h"

/* Errors read "plan.json: [3]: ..." (array index) or "run.jsonl:4: ..." (line). */
static int append_one(ob_log *log, ob_value *msg, const char *path, int is_line, size_t n,
                      ob_error *err) {
  ob_error e;
  long rc = ob_log_append(log, msg, &e);
  if (rc < 0)
    return ob_error_set(err, (int)rc, n, is_line ? "%s:%zu: %s" : "%s: [%zu]: %s", path, n, e.msg);
  return OB_OK;
}

static int load_array(ob_log *log, const char *path, const ob_buf *b, ob_error *err) {
  ob_error e;
  ob_value *all = ob_json_parse(b->data, b->len, &e);
  if (!all)
    return ob_error_set(err, OB_EJSON, e.pos, "%s: %s", path, e.msg);
  int rc = OB_OK;
  if (ob_typeof(all) != OB_ARRAY)
    rc = ob_error_set(err, OB_EINVAL, 0, "%s: expected a JSON array of messages", path);
  for (size_t i = 0; rc == OB_OK && i < ob_array_len(all); i++)
    rc = append_one(log, ob_array_get(all, i), path, 0, i, err);
  ob_unref(all);
  return rc;
}

int ob_journal_is_record(const ob_value *v) {
  return ob_typeof(v) == OB_OBJECT && ob_object_get(v, "journal", 7) != NULL;
}

static int load_lines(ob_log *log, const char *path, const ob_buf *b, ob_error *err) {
  const char *p = b->data, *end = b->data + b->len;
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *stop = nl ? nl : end;
    const char *q = p;
    while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r'))
      q++;
    if (q < stop) {
      ob_error e;
      ob_value *msg = ob_json_parse(p, (size_t)(stop - p), &e);
      if (!msg && !nl) {
        fprintf(stderr, "obelus: %s:%zu: the last line is torn (the process died while "
                        "writing it); ignored\n", path, line);
        break;
      }
      if (!msg) { /* each line is its own document: its "line 1, " says nothing */
        const char *why = strncmp(e.msg, "line 1, ", 8) ? e.msg : e.msg + 8;
        return ob_error_set(err, OB_EJSON, line, "%s:%zu: %s", path, line, why);
      }
      int rc = ob_journal_is_record(msg) ? OB_OK : append_one(log, msg, path, 1, line, err);
      ob_unref(msg);
      if (rc != OB_OK)
        return rc;
    }
    p = nl ? nl + 1 : end;
  }
  return OB_OK;
}

int ob_journal_load(ob_log *log, const char *path, ob_error *err) {
  ob_buf b;
  ob_buf_init(&b);
  int rc = ob_read_file(path, &b, err);
  if (rc == OB_OK) {
    size_t i = 0;
    while (i < b.len && strchr(" \t\r\n", b.data[i]))
      i++;
    rc = i < b.len && b.data[i] == '[' ? load_array(log, path, &b, err)
                                       : load_lines(log, path, &b, err);
  }
  ob_buf_free(&b);
  return rc;
}
