/* ob_map.h -- a hash map from byte strings to pointers: tool names, call ids,
 * path-trie children. Open addressing over an index of entries kept in the
 * order they were first put; no deletion. */
#ifndef OB_MAP_H
#define OB_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ob_map_entry {
  char *key; /* a private copy, NUL-terminated */
  size_t len;
  uint32_t hash;
  void *val;
} ob_map_entry;

typedef struct ob_map_slot ob_map_slot;

typedef struct ob_map {
  size_t n, cap;          /* entries; index slots (0 or a power of two, at least 2n) */
  ob_map_entry *entries;  /* in the order they were put (room for cap / 2) */
  ob_map_slot *slots;     /* the index: each a hash and an entry's number + 1, or 0 */
} ob_map;

void ob_map_init(ob_map *m);
/* Frees the map's own memory (keys included), not the values. */
void ob_map_free(ob_map *m);
/* The value stored under key, or NULL. */
void *ob_map_get(const ob_map *m, const char *key, size_t len);
/* Stores val under key (replacing any value there); returns the old value or NULL. */
void *ob_map_put(ob_map *m, const char *key, size_t len, void *val);

/* Iteration in the order the keys were first put:
 * for (size_t i = 0; ob_map_next(m, &i, &e);) */
int ob_map_next(const ob_map *m, size_t *i, ob_map_entry **e);

#endif
