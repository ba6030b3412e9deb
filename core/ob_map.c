/* ob_map.c -- a hash map from byte strings to pointers (open addressing, FNV-1a).
 * Lookups are O(1) expected; the table doubles when half full. */
#include <stdlib.h>
#include <string.h>

#include "ob_map.h"

static uint32_t hash(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h ^ (h >> 15);
}

void ob_map_init(ob_map *m) { memset(m, 0, sizeof *m); }

void ob_map_free(ob_map *m) {
  for (size_t i = 0; i < m->cap; i++)
    free(m->slots[i].key);
  free(m->slots);
  ob_map_init(m);
}

static ob_map_entry *find(const ob_map *m, const char *key, size_t len, uint32_t h) {
  size_t mask = m->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    ob_map_entry *e = &m->slots[i];
    if (!e->key || (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0))
      return e;
  }
}

void *ob_map_get(const ob_map *m, const char *key, size_t len) {
  if (!m->cap)
    return NULL;
  ob_map_entry *e = find(m, key, len, hash(key, len));
  return e->key ? e->val : NULL;
}

static void grow(ob_map *m) {
  ob_map old = *m;
  m->cap = old.cap ? old.cap * 2 : 8;
  m->slots = calloc(m->cap, sizeof *m->slots);
  if (!m->slots)
    abort();
  for (size_t i = 0; i < old.cap; i++)
    if (old.slots[i].key)
      *find(m, old.slots[i].key, old.slots[i].len, old.slots[i].hash) = old.slots[i];
  free(old.slots);
}

void *ob_map_put(ob_map *m, const char *key, size_t len, void *val) {
  if (2 * (m->n + 1) > m->cap)
    grow(m);
  uint32_t h = hash(key, len);
  ob_map_entry *e = find(m, key, len, h);
  if (e->key) {
    void *old = e->val;
    e->val = val;
    return old;
  }
  e->key = malloc(len + 1);
  if (!e->key)
    abort();
  memcpy(e->key, key, len);
  e->key[len] = '\0';
  e->len = len;
  e->hash = h;
  e->val = val;
  m->n++;
  return NULL;
}

int ob_map_next(const ob_map *m, size_t *i, ob_map_entry **e) {
  for (; *i < m->cap; (*i)++)
    if (m->slots[*i].key) {
      *e = &m->slots[(*i)++];
      return 1;
    }
  return 0;
}
