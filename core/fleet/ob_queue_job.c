/* ob_queue_job.c -- a job's stream entry decoded and checked (ob_queue_job.h).
 *
 * Anyone with access to Redis can XADD to a queue's stream, so nothing in an
 * entry is trusted: the id must be a short name (it names a file in the worker's
 * folder and a key), the plan a hash of 16 hex digits (it names a key), the name
 * short UTF-8 without control characters (it is printed), the inputs a JSON array
 * of bounded size (the run reads it as one). What each input holds and what the
 * plan's text holds are checked later by what checks any run's (the plan reader
 * and the log), on the worker.
 *
 * Costs: one pass over each field; the inputs parsed once. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue_job.h"

int ob_queue_id_ok(const char *s, size_t len) {
  if (!s || !len || len > OB_QUEUE_ID_MAX)
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

/* UTF-8 without control characters (C0, DEL, C1): safe to print. */
static int printable_utf8(const char *s, size_t len);

int ob_queue_plan_name_ok(const char *s, size_t len) {
  return s && len && len <= OB_QUEUE_NAME_MAX && printable_utf8(s, len);
}

static int printable_utf8(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    unsigned c = *p++;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        return 0;
      continue;
    }
    size_t n = ob_utf8_seq(p - 1, (size_t)(end - p) + 1);
    if (!n || (c == 0xc2 && p[0] < 0xa0)) /* not UTF-8, or a C1 control U+0080..U+009F */
      return 0;
    p += n - 1;
  }
  return 1;
}

void ob_queue_text_clean(char *s) {
  for (unsigned char *p = (unsigned char *)s; p && *p; p++)
    if (*p < 0x20 || *p >= 0x7f)
      *p = '?';
}

static int is_hex16(const char *s, size_t len) {
  if (len != 16)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

static const char *const KNOWN[] = {"job", "plan", "name", "inputs", "batch"};
enum { F_JOB, F_PLAN, F_NAME, F_INPUTS, F_BATCH, F_N };

/* A batch id: 1 to 19 digits, not starting with 0 (what INCR of batchseq gives). */
static int is_batch_id(const char *s, size_t len) {
  if (!len || len > 19 || s[0] == '0')
    return 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return 0;
  return 1;
}

/* The first problem only: later ones are not looked for once one is known. */
static void problem(ob_queue_entry *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void problem(ob_queue_entry *e, const char *fmt, ...) {
  if (e->error)
    return;
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ob_queue_text_clean(msg);
  e->error = ob_xstrdup(msg);
}

int ob_queue_entry_decode(const char *const *fv, const size_t *lens, size_t n,
                          ob_queue_entry *out) {
  memset(out, 0, sizeof *out);
  const char *val[F_N] = {0};
  size_t vlen[F_N] = {0};
  int seen[F_N] = {0};
  if (n % 2)
    problem(out, "the entry's fields and values are not in pairs (%zu strings)", n);
  for (size_t k = 0; k + 1 < n; k += 2) {
    if (!fv[k] || !fv[k + 1]) {
      problem(out, "a field or a value of the entry is not a string");
      continue;
    }
    for (int f = 0; f < F_N; f++) {
      if (lens[k] != strlen(KNOWN[f]) || memcmp(fv[k], KNOWN[f], lens[k]))
        continue;
      if (seen[f]++) {
        problem(out, "the entry gives the field \"%s\" more than once", KNOWN[f]);
        break;
      }
      val[f] = fv[k + 1];
      vlen[f] = lens[k + 1];
    }
  }
  /* job: the id; without a valid one the failure goes under the entry's id */
  if (!seen[F_JOB])
    problem(out, "the entry has no \"job\" field (the job's id)");
  else if (ob_queue_id_ok(val[F_JOB], vlen[F_JOB]))
    out->id = ob_xstrndup(val[F_JOB], vlen[F_JOB]);
  else
    problem(out, "\"job\": not a job id (1 to 64 of the letters, digits and _ . -)");

  if (!seen[F_PLAN])
    problem(out, "the entry has no \"plan\" field (the hash of the plan's text)");
  else if (!is_hex16(val[F_PLAN], vlen[F_PLAN]))
    problem(out, "\"plan\": not a plan's hash (16 hex digits, lower case)");
  else
    memcpy(out->plan, val[F_PLAN], 17 - 1), out->plan[16] = '\0';

  if (!seen[F_NAME])
    out->name = ob_xstrdup("plan.json");
  else if (!ob_queue_plan_name_ok(val[F_NAME], vlen[F_NAME]))
    problem(out, "\"name\": not a plan's name (1 to 1024 bytes of UTF-8, no control "
                 "characters)");
  else
    out->name = ob_xstrndup(val[F_NAME], vlen[F_NAME]);
  if (!out->name)
    out->name = ob_xstrdup("plan.json");

  if (seen[F_BATCH] && !is_batch_id(val[F_BATCH], vlen[F_BATCH]))
    problem(out, "\"batch\": not a batch id (1 to 19 digits)");
  else if (seen[F_BATCH])
    memcpy(out->batch, val[F_BATCH], vlen[F_BATCH]), out->batch[vlen[F_BATCH]] = '\0';

  if (seen[F_INPUTS] && !out->error) {
    ob_error err;
    if (vlen[F_INPUTS] > OB_QUEUE_INPUTS_MAX) {
      problem(out, "\"inputs\": more than %zu MB of JSON", OB_QUEUE_INPUTS_MAX >> 20);
    } else if (!(out->inputs = ob_json_parse(val[F_INPUTS], vlen[F_INPUTS], &err))) {
      problem(out, "\"inputs\": not JSON: %s", err.msg);
    } else if (ob_typeof(out->inputs) != OB_ARRAY) {
      problem(out, "\"inputs\": a JSON %s, where an array of input documents is expected",
              ob_type_name(ob_typeof(out->inputs)));
      ob_unref(out->inputs);
      out->inputs = NULL;
    }
  }
  if (out->error) {
    ob_unref(out->inputs);
    out->inputs = NULL;
    return OB_EINVAL;
  }
  return OB_OK;
}

void ob_queue_entry_free(ob_queue_entry *e) {
  free(e->id);
  free(e->name);
  ob_unref(e->inputs);
  free(e->error);
  memset(e, 0, sizeof *e);
}
