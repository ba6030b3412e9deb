/* ob_mem.h -- allocation that cannot fail: the core's answer to ENOMEM is to abort,
 * as Lua's and libuv's own default allocators effectively do (see ob_value.h). */
#ifndef OB_MEM_H
#define OB_MEM_H

#include <stdlib.h>
#include <string.h>

static inline void *ob_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    abort();
  return p;
}

static inline void *ob_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    abort();
  return p;
}

/* ob_xcalloc on an `align`-byte boundary (a power of two, a multiple of sizeof(void *));
 * freed with free(). */
static inline void *ob_xcalloc_aligned(size_t n, size_t size, size_t align) {
  void *p = NULL;
  n = n ? n : 1;
  size = size ? size : 1;
  if (n > (size_t)-1 / size || posix_memalign(&p, align, n * size))
    abort();
  memset(p, 0, n * size);
  return p;
}

static inline void *ob_xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p)
    abort();
  return p;
}

static inline char *ob_xstrndup(const char *s, size_t n) {
  char *d = ob_xmalloc(n + 1);
  if (n)
    memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* NULL is copied as "" */
static inline char *ob_xstrdup(const char *s) { return ob_xstrndup(s ? s : "", s ? strlen(s) : 0); }

#endif
