/* ob_hash.h -- FNV-1a: 64 bits, a change detector (tool files, plans in a queue),
 * not a defence against someone forging one; and 32 bits with a finaliser, the index
 * of hash tables (ob_map, the objects of ob_value). One multiply per byte. */
#ifndef OB_HASH_H
#define OB_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t ob_fnv1a64_more(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static inline uint64_t ob_fnv1a64(const char *p, size_t n) {
  return ob_fnv1a64_more(14695981039346656037ull, p, n);
}

/* FNV-1a, then a murmur finaliser, so that all 32 bits are usable a few at a time (a
 * table indexes by the low bits, a trie node by 5 of them). */
static inline uint32_t ob_hash32(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

#endif
