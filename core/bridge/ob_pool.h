/* ob_pool.h -- the allocator of an engine's Lua state: small blocks from slabs.
 *
 * Every call makes a few small, short-lived Lua objects (its params and ctx
 * tables, strings, the result), and the collector frees them soon after.
 * Through the C library's malloc each of them costs a search of its bins and,
 * freed, a trip through its chunk headers. Lua's allocator interface passes
 * the old size of a block to every free and realloc, so small blocks need no
 * header at all: they are cut from slabs in 16-byte size classes and kept,
 * once freed, on one list per class, last freed first reused (its memory is
 * the likeliest to still be in the cache). Blocks larger than OB_POOL_SMALL
 * go to malloc. The classes reach 1 KB so that a coroutine's first stack
 * (720 bytes) comes from a slab too.
 *
 * Slabs are 64 KB from malloc until the pool holds 4 MB; after that each is
 * a 2 MB region asked to be one transparent huge page (madvise), so that a
 * burst of new coroutines costs a page fault per 2 MB rather than per 4 KB.
 * Where huge pages are off, those regions are ordinary memory.
 *
 * Trade-off: memory of freed small blocks is kept for the engine's state
 * (reused by later blocks of the same class), and returned to the system
 * when the state is closed (ob_pool_free after lua_close). One pool serves
 * one lua_State: no locking, as a Lua state is single-threaded anyway.
 *
 * With AddressSanitizer every block goes to malloc, so that the sanitizer
 * sees each one. */
#ifndef OB_POOL_H
#define OB_POOL_H

#include <lua.h>
#include <stddef.h>

#include "base/ob_mem.h"

#define OB_POOL_SMALL 1024
#define OB_POOL_CLASSES (OB_POOL_SMALL / 16)

typedef struct ob_pool {
  void *free[OB_POOL_CLASSES]; /* freed blocks of each class, linked through their first word */
  char *next, *end;            /* the rest of the current slab */
  void *slabs;                 /* every slab, linked through their first word */
  size_t slab_bytes;           /* the slabs' size in all */
  int warn_mode;               /* Lua warnings: 0 off, 1 on, 2 on in mid-message */
  void (*warn)(void *ud, const char *msg); /* a whole warning, once "@on" (ob_pool_set_warn) */
  void *warn_ud;
  char *warn_text;             /* the pieces of a warning in the middle (lua_warning tocont) */
  size_t warn_len;
  /* --max-memory: the bytes Lua holds (blocks in use, as Lua counts them),
   * and, while `limit` is set (armed), a request that would pass the
   * account's limit (acct below, which holds Lua, values and the log; this
   * pool's own count without one) fails (Lua raises "not enough memory",
   * after a full collection) and sets `hit`. The engine arms it only around
   * a call's resume and its libuv callbacks, protected calls: outside one,
   * a failed allocation would end the process (Lua's panic). */
  size_t used, limit;
  size_t max; /* the limit set (--max-memory), armed by ob_pool_arm */
  int hit;
  /* The memory account the Lua heap is part of (ob_mem.h; NULL: none): the
   * pool charges it what Lua holds, and while armed refuses a block that
   * would pass its limit, so that values, the log and the Lua heap share
   * one bound. */
  struct ob_mem *acct;
} ob_pool;

/* Arms the pool's limit (max) for a protected call; returns what to give
 * ob_pool_disarm after it (arming nests). */
static inline size_t ob_pool_arm(ob_pool *p) {
  size_t was = p->limit;
  p->limit = p->max;
  p->hit = 0;
  return was;
}
static inline void ob_pool_disarm(ob_pool *p, size_t was) { p->limit = was; }

/* A new empty pool (NULL when out of memory). */
ob_pool *ob_pool_new(void);
/* Frees the pool and every block still in it: after lua_close. */
void ob_pool_free(ob_pool *p);
/* The lua_Alloc function, with the pool as ud. */
void *ob_pool_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* A Lua state on the pool, with luaL_newstate's panic and warning behaviour
 * (a panic ends the process with the error: ob_die; warnings off until "@on", then
 * handed to the pool's warn hook). NULL when out of memory. */
lua_State *ob_pool_new_state(ob_pool *p);
/* Where the state's warnings go once "@on" turned them on: fn gets each whole warning
 * (its continuation pieces joined). Without one (NULL), they are dropped. */
void ob_pool_set_warn(ob_pool *p, void (*fn)(void *ud, const char *msg), void *ud);

#endif
