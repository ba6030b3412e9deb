/* ob_queue_memory.h -- what a finished job of a queue costs Redis, measured on the last
 * ones to finish (ob_queue_memory.c): what `obelus status` shows. */
#ifndef OB_QUEUE_MEMORY_H
#define OB_QUEUE_MEMORY_H

#include <hiredis/hiredis.h>

#define OB_QUEUE_MEMORY_SAMPLE 100

/* EVAL's arguments for queue q (argv: 9 of them; free with ob_queue_memory_args_free). */
typedef struct ob_queue_memory_args {
  const char *argv[9];
  char *owned[5];
} ob_queue_memory_args;
void ob_queue_memory_args_make(ob_queue_memory_args *a, const char *q);
void ob_queue_memory_args_free(ob_queue_memory_args *a);

/* What the reply says: the jobs measured (those of the last OB_QUEUE_MEMORY_SAMPLE to
 * finish still kept), and their bytes: the hashes' and their journals' shares. */
typedef struct ob_queue_memory {
  long long jobs;
  double hash_bytes, journal_bytes;
} ob_queue_memory;
/* 0, or -1 for a reply of another shape (an error). */
int ob_queue_memory_reply(const redisReply *rp, ob_queue_memory *m);

/* What a finished job costs Redis, to the byte: its hash and its journal's share (m's
 * mean), or -1 when none was measured. `status` and the ui's fleet page both show it. */
long long ob_queue_memory_per_job(const ob_queue_memory *m);

/* Redis's used_memory from the text INFO memory answers (NULL allowed), or -1. */
long long ob_queue_memory_used(const char *info);

#endif
