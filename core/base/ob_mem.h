/* ob_mem.h -- the memory account of a run, and allocation that cannot fail.
 *
 * The account
 * -----------
 * `--max-memory` bounds what a run holds: the Lua heap (ob_pool.c), values
 * (ob_value.c), the message log's storage (ob_log.c) and byte buffers
 * (ob_buf.c: JSON text, journal records). Each of those charges an ob_mem
 * account with the bytes it takes (malloc_usable_size: what malloc really
 * gave) and releases them when it frees: one add to a counter per
 * allocation, no lock. An engine owns one account (ob_engine.c); the
 * account charged is the thread's current one (ob_mem_cur): the first
 * engine made on a thread claims it, and a call's entry points (its resume,
 * its libuv callbacks, its writes) make it their engine's, so that two
 * engines on one thread (the Lua module's, the C API's) each count their
 * own. Memory freed under another account than the one it was charged to
 * is released from that one, never below zero (an undercount, never a
 * false refusal).
 *
 * Where the limit is enforced: the Lua heap refuses a block that would pass
 * it while a tool runs (a Lua memory error of the call, ob_pool.c); C
 * checks it where a plan or tool makes memory grow, and fails that call
 * with "memory limit of N MB reached (--max-memory)": converting a tool's
 * result to values (ob_lua.c: each string), making a call's writes (their
 * text and the log's new nodes, ob_write.c), and before library C code
 * that would take memory outside the account (an async uv.fs_read, whose
 * string luv makes where no pcall is; cjson.encode's buffers: ob_engine.c).
 * A delegated run is charged for its structs (ob_delegate.c) before it is
 * made, and refused when they would pass the limit.
 * Between two checks C may pass the limit by one result. Byte buffers
 * (ob_buf) are not counted: each lives a moment (a journal record, a
 * printed message) and is bounded by --max-output, error messages by
 * ob_message_max. ob_mem_charge_to / ob_mem_release_to let other holders
 * count and be refused too: an HTTP answer's body and header lines while
 * the transfer holds them (ob_http.c, ob_http_set_mem).
 *
 * Allocation that cannot fail
 * ---------------------------
 * The ob_x* functions abort when malloc returns NULL. They are kept for the
 * engine's fixed-size bookkeeping, whose size a plan or tool does not choose:
 * structs of the engine, run, call and plan, value nodes of bounded size
 * (vector and trie nodes of 32 slots, objects' flat entries), option lists,
 * the file names and messages of the CLI, byte buffers (bounded as above).
 * A value node's size is fixed, but how many a plan makes is not: they are
 * counted (ob_mem_alloc) and the checks above refuse the call that would
 * make too many, before malloc can fail. What a tool sizes (a string of its
 * result) goes through the fallible path, ob_mem_try_alloc and
 * ob_string_try (ob_value.h), whose NULL is an error of the call that
 * asked ("out of memory" when malloc itself failed). With no limit (no
 * --max-memory, no ulimit) the machine's memory is the limit, and the
 * kernel's OOM killer, not malloc, is what usually ends a process there. */
#ifndef OB_MEM_H
#define OB_MEM_H

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

typedef struct ob_mem {
  size_t used;  /* bytes charged and not yet released */
  size_t limit; /* the most it may hold (0: no limit) */
  int hit;      /* set when something was refused for the limit */
} ob_mem;

/* The account this thread charges (NULL: none, nothing is counted). Read at
 * every allocation: initial-exec, so that in the Lua module (a shared object)
 * it is one load, not a call to __tls_get_addr. */
#if defined(__GNUC__)
#define OB_MEM_TLS __attribute__((tls_model("initial-exec")))
#else
#define OB_MEM_TLS
#endif
extern _Thread_local ob_mem *ob_mem_cur OB_MEM_TLS;

/* Makes m this thread's account; returns the one before (for ob_mem_use after). */
static inline ob_mem *ob_mem_use(ob_mem *m) {
  ob_mem *was = ob_mem_cur;
  ob_mem_cur = m;
  return was;
}

static inline void ob_mem_add(ob_mem *m, size_t n) {
  if (m)
    m->used += n;
}
static inline void ob_mem_sub(ob_mem *m, size_t n) {
  if (m)
    m->used = m->used > n ? m->used - n : 0;
}

/* Would n more bytes pass m's limit? (sets m->hit when they would) */
static inline int ob_mem_would_pass(ob_mem *m, size_t n) {
  if (!m || !m->limit || (n <= m->limit && m->used <= m->limit - n))
    return 0;
  m->hit = 1;
  return 1;
}

/* Is the current account past its limit? */
static inline int ob_mem_over(void) { return ob_mem_would_pass(ob_mem_cur, 0); }

/* For holders of memory outside the allocators below (HTTP bodies): charges n
 * bytes to account m, or returns -1 (and charges nothing) when they would
 * pass its limit; ob_mem_release_to gives them back. A holder charges as its
 * buffer grows and releases what it charged when it frees. A holder that
 * knows its engine passes &engine->mem (callbacks from the loop run outside
 * any call, where the current account may be another engine's); the
 * ob_mem_charge / ob_mem_release forms use the current account. */
static inline int ob_mem_charge_to(ob_mem *m, size_t n) {
  if (ob_mem_would_pass(m, n))
    return -1;
  ob_mem_add(m, n);
  return 0;
}
static inline void ob_mem_release_to(ob_mem *m, size_t n) { ob_mem_sub(m, n); }
static inline int ob_mem_charge(size_t n) { return ob_mem_charge_to(ob_mem_cur, n); }
static inline void ob_mem_release(size_t n) { ob_mem_sub(ob_mem_cur, n); }

/* The message of a refusal: "memory limit of N MB reached (--max-memory)". */
#define OB_MEM_LIMIT_FMT "memory limit of %zu MB reached (--max-memory)"
static inline size_t ob_mem_limit_mb(void) { return ob_mem_cur ? ob_mem_cur->limit >> 20 : 0; }

/* --- counted allocation: charged to the current account --------------------- */

static inline void *ob_mem_counted(void *p) {
  if (p && ob_mem_cur)
    ob_mem_add(ob_mem_cur, malloc_usable_size(p));
  return p;
}

/* malloc, counted; NULL when out of memory or when n would pass the limit. */
static inline void *ob_mem_try_alloc(size_t n) {
  if (ob_mem_would_pass(ob_mem_cur, n))
    return NULL;
  return ob_mem_counted(malloc(n ? n : 1));
}

/* realloc, counted; NULL (p left as it was) when out of memory or over the limit. */
static inline void *ob_mem_try_realloc(void *p, size_t n) {
  size_t old = p ? malloc_usable_size(p) : 0;
  if (n > old && ob_mem_would_pass(ob_mem_cur, n - old))
    return NULL;
  void *q = realloc(p, n ? n : 1);
  if (!q)
    return NULL;
  ob_mem_sub(ob_mem_cur, old);
  return ob_mem_counted(q);
}

static inline void ob_mem_free(void *p) {
  if (p && ob_mem_cur)
    ob_mem_sub(ob_mem_cur, malloc_usable_size(p));
  free(p);
}

/* Counted, and aborting on NULL: fixed-size bookkeeping only (see above). */
static inline void *ob_mem_alloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    abort();
  return ob_mem_counted(p);
}

static inline void *ob_mem_realloc(void *p, size_t n) {
  size_t old = p ? malloc_usable_size(p) : 0;
  void *q = realloc(p, n ? n : 1);
  if (!q)
    abort();
  ob_mem_sub(ob_mem_cur, old);
  return ob_mem_counted(q);
}

/* --- the end of the process ----------------------------------------------------
 * ob_die: a state the library cannot go on from (the Lua API used unprotected, a
 * thread that cannot start, an engine freed from inside its own callback): msg and
 * a newline on standard error, then abort(). The one place below the CLI that
 * writes to a terminal, for it has no one else left to tell. */
_Noreturn void ob_die(const char *msg);

/* --- allocation that cannot fail (not counted) ------------------------------- */

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
