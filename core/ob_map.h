/* ob_map.h -- a hash map from byte strings to pointers: tool names, call ids,
 * path-trie children. Open addressing, linear probing, no deletion. */
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

typedef struct ob_map {
  size_t n, cap; /* cap: 0 or a power of two, kept at least twice n */
  ob_map_entry *slots;
} ob_map;

void ob_map_init(ob_map *m);
/* Frees the map's own memory (keys included), not the values. */
void ob_map_free(ob_map *m);
/* The value stored under key, or NULL. */
void *ob_map_get(const ob_map *m, const char *key, size_t len);
/* Stores val under key (replacing any value there); returns the old value or NULL. */
void *ob_map_put(ob_map *m, const char *key, size_t len, void *val);

/* Iteration in no particular order: for (size_t i = 0; ob_map_next(m, &i, &e);) */
int ob_map_next(const ob_map *m, size_t *i, ob_map_entry **e);

#endif
