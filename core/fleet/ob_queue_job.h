/* ob_queue_job.h -- a job's stream entry (ob_queue.h lays the fields out) decoded
 * and checked, field by field, before a worker uses any of it. Pure: no Redis, no
 * loop, so that a fuzzer (fuzz/fuzz_job.c) can call it on any bytes. */
#ifndef OB_QUEUE_JOB_H
#define OB_QUEUE_JOB_H

#include <stddef.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

/* A job id: 1 to OB_QUEUE_ID_MAX of [A-Za-z0-9_.-] (submit gives "N" and "N.K"; a
 * worker names files and keys after it). */
#define OB_QUEUE_ID_MAX 64
/* A plan's name (its file name, in messages): at most this many bytes of UTF-8,
 * no control characters. */
#define OB_QUEUE_NAME_MAX 1024
/* A plan's text in Redis: at most this many bytes (submit refuses more; a worker
 * fails a job whose plan is longer). */
#define OB_QUEUE_PLAN_MAX ((size_t)64 << 20)
/* The inputs field: at most this many bytes of JSON. */
#define OB_QUEUE_INPUTS_MAX ((size_t)64 << 20)

typedef struct ob_queue_entry {
  char *id;       /* the job's id, checked; NULL when the entry names none that is valid */
  char plan[17];  /* its plan's hash (16 hex digits); "" when missing or invalid */
  char *name;     /* the plan's name; "plan.json" when the entry gives none */
  ob_value *inputs; /* an array of input documents, or NULL */
  char batch[20];   /* the batch it was submitted in (1 to 19 digits); "" when none */
  char *error;    /* why the job cannot run (the first problem found), or NULL */
} ob_queue_entry;

/* Decodes an entry's n field/value strings: fv[2k] a field's name, fv[2k+1] its
 * value, lens[i] their lengths (they may hold NUL bytes; NULL: not a string).
 * Fills out in every case (free with ob_queue_entry_free) and returns OB_OK, or
 * OB_EINVAL with out->error saying what is wrong, out->id still set when the id
 * itself is valid (the failure is stored under it). Known fields: job, plan,
 * name, inputs, batch; others are ignored; a known one given twice is an error. */
int ob_queue_entry_decode(const char *const *fv, const size_t *lens, size_t n,
                          ob_queue_entry *out);
void ob_queue_entry_free(ob_queue_entry *e);

/* Every byte of s that is not printable ASCII made '?': for messages that quote
 * what an entry or a plan's text held (they are printed on terminals). */
void ob_queue_text_clean(char *s);

/* A plan's name as ob_queue_entry_decode accepts it. */
int ob_queue_plan_name_ok(const char *s, size_t len);

/* A job id as ob_queue_entry_decode accepts it. */
int ob_queue_id_ok(const char *s, size_t len);

#endif
