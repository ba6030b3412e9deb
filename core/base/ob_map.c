/* ob_map.c -- a hash map from byte strings to pointers (ob_map.h).
 *
 * The entries sit in one array in the order they were first put; the index is
 * a table of (hash, entry number) pairs probed linearly, doubled when half
 * full. A probe compares 8-byte slots and touches an entry only when the whole
 * 32-bit hash matches, and iteration walks the array, so its order is the
 * order of insertion: nothing that iterates a map (the journal's tool files,
 * dependency lists) depends on the hash function.
 *
 * The hash is FNV-1a with a full avalanche at the end (murmur3's fmix32): ids
 * that differ only in their last characters ("a@i1", "a@i2", ...) otherwise
 * land in neighbouring slots and probe each other's runs.
 *
 * Costs: a lookup hashes the key once and probes O(1) expected slots; a put
 * copies the key (one malloc); 8 bytes of index per slot, plus one entry per
 * key (32 bytes) in an array grown by doubling. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_hash.h"
#include "base/ob_map.h"

struct ob_map_slot {
  uint32_t hash;
  uint32_t at; /* entry number + 1; 0: free */
};

static uint32_t hash(const char *s, size_t n) { return ob_hash32(s, n); }

void ob_map_init(ob_map *m) { memset(m, 0, sizeof *m); }

void ob_map_free(ob_map *m) {
  for (size_t i = 0; i < m->n; i++)
    free(m->entries[i].key);
  free(m->entries);
  free(m->slots);
  ob_map_init(m);
}

/* The slot of key: its entry's, or the free one where it would go. */
static ob_map_slot *find(const ob_map *m, const char *key, size_t len, uint32_t h) {
  size_t mask = m->cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    ob_map_slot *s = &m->slots[i];
    if (!s->at)
      return s;
    if (s->hash == h) {
      const ob_map_entry *e = &m->entries[s->at - 1];
      if (e->len == len && memcmp(e->key, key, len) == 0)
        return s;
    }
  }
}

void *ob_map_get(const ob_map *m, const char *key, size_t len) {
  if (!m->n)
    return NULL;
  ob_map_slot *s = find(m, key, len, hash(key, len));
  return s->at ? m->entries[s->at - 1].val : NULL;
}

static void grow(ob_map *m) {
  size_t cap = m->cap ? m->cap * 2 : 8;
  ob_map_slot *slots = calloc(cap, sizeof *slots);
  ob_map_entry *entries = realloc(m->entries, cap / 2 * sizeof *entries);
  if (!slots || !entries)
    abort();
  free(m->slots);
  m->slots = slots;
  m->entries = entries;
  m->cap = cap;
  for (size_t i = 0; i < m->n; i++) {
    uint32_t h = entries[i].hash;
    size_t at = h & (cap - 1);
    while (slots[at].at)
      at = (at + 1) & (cap - 1);
    slots[at].hash = h;
    slots[at].at = (uint32_t)i + 1;
  }
}

void *ob_map_put(ob_map *m, const char *key, size_t len, void *val) {
  if (2 * (m->n + 1) > m->cap)
    grow(m);
  uint32_t h = hash(key, len);
  ob_map_slot *s = find(m, key, len, h);
  if (s->at) {
    ob_map_entry *e = &m->entries[s->at - 1];
    void *old = e->val;
    e->val = val;
    return old;
  }
  ob_map_entry *e = &m->entries[m->n];
  if (!(e->key = malloc(len + 1)))
    abort();
  memcpy(e->key, key, len);
  e->key[len] = '\0';
  e->len = len;
  e->hash = h;
  e->val = val;
  s->hash = h;
  s->at = (uint32_t)++m->n;
  return NULL;
}

int ob_map_next(const ob_map *m, size_t *i, ob_map_entry **e) {
  if (*i >= m->n)
    return 0;
  *e = &m->entries[(*i)++];
  return 1;
}
