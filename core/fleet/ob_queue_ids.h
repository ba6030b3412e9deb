/* ob_queue_ids.h -- a set of job ids to wait on, kept small whatever its size: what
 * `obelus wait` awaits (ob_queue_wait.h) and what the waiting client looks ids up in.
 * Pure: no Redis, no loop (ob_queue_ids.c tells how it is stored).
 *
 * Ids are added (one by one, or a range of numbers as a batch gives), then the set
 * is sealed: sorted, each id once. Sealed, each id has an index in [0, count): the
 * numbers first, in increasing order, then the other ids in byte order. */
#ifndef OB_QUEUE_IDS_H
#define OB_QUEUE_IDS_H

#include <stddef.h>
#include <stdint.h>

/* What ob_queue_ids_find gives for an id not in the set. */
#define OB_QUEUE_IDS_NONE ((size_t)-1)
/* The longest id text the set holds: a number of 19 digits, or any text this long
 * (ids longer than this are not stored: a job id is at most 64 bytes). */
#define OB_QUEUE_IDS_TEXT_MAX 127

typedef struct ob_queue_ids ob_queue_ids;

ob_queue_ids *ob_queue_ids_new(void);
void ob_queue_ids_free(ob_queue_ids *s);

/* Adds one id (len bytes, 1 to OB_QUEUE_IDS_TEXT_MAX; others are ignored). */
void ob_queue_ids_add(ob_queue_ids *s, const char *id, size_t len);
/* Adds the numbers first..last (first <= last < 10^19). */
void ob_queue_ids_add_range(ob_queue_ids *s, uint64_t first, uint64_t last);
/* Sorts the set, each id once; nothing is added after. Returns the count. */
size_t ob_queue_ids_seal(ob_queue_ids *s);
size_t ob_queue_ids_count(const ob_queue_ids *s);
/* The index of an id in the sealed set, or OB_QUEUE_IDS_NONE. */
size_t ob_queue_ids_find(const ob_queue_ids *s, const char *id, size_t len);
/* The id at index i (< count), written with its NUL into buf (at least
 * OB_QUEUE_IDS_TEXT_MAX + 1 bytes); its length. */
size_t ob_queue_ids_get(const ob_queue_ids *s, size_t i, char *buf);
/* The bytes the sealed set holds (for the costs it documents and its test). */
size_t ob_queue_ids_bytes(const ob_queue_ids *s);

/* The number a job id spells, when it is one in canonical form ("0", or digits
 * without a leading zero, at most 19 of them): 1 and *out; 0 otherwise. */
int ob_queue_ids_number(const char *id, size_t len, uint64_t *out);

#endif
