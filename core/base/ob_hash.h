/* ob_hash.h -- FNV-1a, 64 bits: a change detector (tool files, plans in a queue),
 * not a defence against someone forging one. One multiply per byte. */
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

#endif
