/* ob_pool.c -- small blocks from slabs for an engine's Lua state (see ob_pool.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bridge/ob_pool.h"

#define SLAB_SIZE ((size_t)64 * 1024)
#define HUGE_SLAB ((size_t)2 * 1024 * 1024) /* an x86-64 huge page */
#define HUGE_AFTER ((size_t)4 * 1024 * 1024) /* slabs so far, in bytes, before huge ones */

#if defined(__SANITIZE_ADDRESS__)
#define OB_POOL_PASSTHROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OB_POOL_PASSTHROUGH 1
#endif
#endif

ob_pool *ob_pool_new(void) { return calloc(1, sizeof(ob_pool)); }

/* A slab starts with its link to the next and its size (0: from malloc). */
typedef struct slab {
  struct slab *next;
  size_t mapped;
} slab;

void ob_pool_free(ob_pool *p) {
  if (!p)
    return;
  free(p->warn_text);
  while (p->slabs) {
    slab *s = p->slabs;
    p->slabs = s->next;
    if (s->mapped)
      munmap(s, s->mapped);
    else
      free(s);
  }
  free(p);
}

#ifndef OB_POOL_PASSTHROUGH
/* A huge-page-aligned region of HUGE_SLAB bytes, asked to be one huge page
 * (Linux's transparent huge pages, in "madvise" mode on most systems), or
 * NULL. One page fault then brings 2 MB instead of 4 KB: measured on sleep
 * 10000 100, whose calls each start a coroutine on fresh memory, the run's
 * page faults went from 4,148 to 1,596 (perf stat, the timed part). */
static void *huge_region(void) {
#if defined(MADV_HUGEPAGE) && defined(MAP_ANONYMOUS)
  size_t len = 2 * HUGE_SLAB;
  char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return NULL;
  char *start = (char *)(((uintptr_t)m + HUGE_SLAB - 1) & ~(uintptr_t)(HUGE_SLAB - 1));
  if (start > m)
    munmap(m, (size_t)(start - m));
  if (start + HUGE_SLAB < m + len)
    munmap(start + HUGE_SLAB, (size_t)(m + len - (start + HUGE_SLAB)));
  madvise(start, HUGE_SLAB, MADV_HUGEPAGE); /* a hint: without it, small pages */
  return start;
#else
  return NULL;
#endif
}

/* The class of a small size (1..OB_POOL_SMALL): blocks of 16 * (class + 1) bytes. */
static size_t size_class(size_t n) { return (n - 1) >> 4; }

static void *small_alloc(ob_pool *p, size_t cls) {
  void *b = p->free[cls];
  if (b) {
    p->free[cls] = *(void **)b;
    return b;
  }
  size_t size = (cls + 1) << 4;
  if ((size_t)(p->end - p->next) < size) { /* a new slab; the rest of the old one is left */
    /* small slabs first, so that an idle engine stays small; huge ones once busy */
    size_t len = p->slab_bytes >= HUGE_AFTER ? HUGE_SLAB : SLAB_SIZE;
    slab *sl = len == HUGE_SLAB ? huge_region() : NULL;
    if (sl) {
      sl->mapped = len;
    } else {
      len = SLAB_SIZE;
      if (!(sl = malloc(len)))
        return NULL;
      sl->mapped = 0;
    }
    sl->next = p->slabs;
    p->slabs = sl;
    p->slab_bytes += len;
    p->next = (char *)sl + sizeof *sl; /* 16 bytes: blocks stay 16-byte aligned */
    p->end = (char *)sl + len;
  }
  b = p->next;
  p->next += size;
  return b;
}

static void small_free(ob_pool *p, void *b, size_t cls) {
  *(void **)b = p->free[cls];
  p->free[cls] = b;
}

#endif

static void *pool_alloc(ob_pool *p, void *ptr, size_t osize, size_t nsize);

void *ob_pool_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  ob_pool *p = ud;
  if (!ptr)
    osize = 0; /* then osize tells what kind of object is coming, not a size */
  if (nsize > osize && p->limit &&
      (p->acct ? ob_mem_would_pass(p->acct, nsize - osize) : p->used + (nsize - osize) > p->limit)) {
    p->hit = 1;
    return NULL; /* Lua collects everything it can, then tries once more */
  }
  void *b = pool_alloc(p, ptr, osize, nsize);
  if (b || !nsize) {
    p->used = p->used - osize + nsize;
    if (nsize > osize)
      ob_mem_add(p->acct, nsize - osize);
    else
      ob_mem_sub(p->acct, osize - nsize);
  }
  return b;
}

static void *pool_alloc(ob_pool *p, void *ptr, size_t osize, size_t nsize) {
#ifdef OB_POOL_PASSTHROUGH
  (void)p;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
#else
  int osmall = osize && osize <= OB_POOL_SMALL, nsmall = nsize && nsize <= OB_POOL_SMALL;
  if (nsize == 0) {
    if (osmall)
      small_free(p, ptr, size_class(osize));
    else
      free(ptr);
    return NULL;
  }
  if (!osmall && !nsmall)
    return realloc(ptr, nsize); /* large to large (or nothing to large) */
  if (osmall && nsmall && size_class(osize) == size_class(nsize))
    return ptr;
  void *b = nsmall ? small_alloc(p, size_class(nsize)) : malloc(nsize);
  if (!b)
    return NULL; /* Lua keeps the old block when shrinking fails: nothing is lost */
  if (ptr) {
    memcpy(b, ptr, osize < nsize ? osize : nsize);
    if (osmall)
      small_free(p, ptr, size_class(osize));
    else
      free(ptr);
  }
  return b;
#endif
}

/* As luaL_newstate's: an error outside any protected call ends the process. */
static int panic(lua_State *L) {
  const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error object is not a string";
  char line[600];
  snprintf(line, sizeof line, "PANIC: unprotected error in call to Lua API (%.500s)", msg);
  ob_die(line);
}

/* Warnings (warn() in Lua) go to the pool's warn hook once "@on" turned them on; off at
 * first. The pool keeps where it is in warn_mode: 0 off, 1 on, 2 on in the middle of a
 * message, whose pieces gather in warn_text until the last one. */
static void warn_fn(void *ud, const char *msg, int tocont) {
  ob_pool *p = ud;
  if (p->warn_mode != 2 && !tocont && msg[0] == '@') { /* a control message */
    if (!strcmp(msg, "@on"))
      p->warn_mode = 1;
    else if (!strcmp(msg, "@off"))
      p->warn_mode = 0;
    return;
  }
  if (p->warn_mode == 0)
    return;
  size_t n = strlen(msg);
  p->warn_text = ob_xrealloc(p->warn_text, p->warn_len + n + 1);
  memcpy(p->warn_text + p->warn_len, msg, n + 1);
  p->warn_len += n;
  if (tocont) {
    p->warn_mode = 2;
    return;
  }
  p->warn_mode = 1;
  if (p->warn)
    p->warn(p->warn_ud, p->warn_text);
  free(p->warn_text);
  p->warn_text = NULL;
  p->warn_len = 0;
}

void ob_pool_set_warn(ob_pool *p, void (*fn)(void *ud, const char *msg), void *ud) {
  p->warn = fn;
  p->warn_ud = ud;
}

lua_State *ob_pool_new_state(ob_pool *p) {
  lua_State *L = lua_newstate(ob_pool_lua_alloc, p);
  if (!L)
    return NULL;
  lua_atpanic(L, panic);
  lua_setwarnf(L, warn_fn, p);
  return L;
}
