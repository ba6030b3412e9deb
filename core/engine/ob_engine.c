/* ob_engine.c -- the engine: one Lua state with luv bound to the engine's loop, and
 * loading tool files (plan-format §9). The `obelus` module tools require is the runtime's
 * (ob_runtime.c): the engine knows nothing of runs.
 *
 * Every entry from C into Lua that runs user code goes through a protected
 * call with a traceback handler (ob_engine_pcall), so a tool's error becomes a
 * message and never takes the engine down. luv's own callback runner would
 * exit the process on an uncaught error in a libuv callback; the engine
 * replaces it with one that reports the error and carries on, except a
 * memory error in a callback a call gave (runtime.lua ties each to its
 * attempt): that fails the call, its handles closed. */
#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* luv.h has one old-style declaration */
#include <luv/luv.h>
#pragma GCC diagnostic pop
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "base/ob_mem.h"
#include "io/ob_http.h"
#include "bridge/ob_pool.h"
#include "engine/ob_engine.h"
#include "engine/ob_exec.h"
#include "base/ob_hash.h"
#include "base/ob_suggest.h"
#include "bridge/ob_lua.h"

#include "engine/ob_runtime.h"

#include "bridge/ob_watch.h"

int ob_engine_pcall(lua_State *L, int nargs, int nres) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, ob_lua_traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nres, base);
  lua_remove(L, base);
  return rc;
}

/* luv runs every libuv callback through this. The watch covers it as it does
 * a call's resume: a callback that never returns is stopped, and so is one
 * running when a SIGINT or SIGTERM comes. Its limit is the watch's as the
 * callback comes: the --max-slice of the run started last on the engine
 * (ob_watch_arm; what a leave restores at the top), of the resume it runs in
 * when nested, the default when no run has started. */
static int luv_callback_pcall(lua_State *L, int nargs, int nres, int flags) {
  int top = lua_gettop(L) - nargs - 1;
  void *pool;
  lua_getallocf(L, &pool);
  ob_engine *e = ob_co_engine(L);
  ob_watch *w = e ? e->watch : NULL;
  ob_watch_outer outer = {0};
  if (w) {
    unsigned limit = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
    outer = ob_watch_enter(w, L, limit ? limit : OB_RUN_MAX_SLICE_MS, 0);
  }
  ob_mem_cur = ((ob_pool *)pool)->acct; /* the engine's account (two engines on a thread) */
  lua_State *owner = e ? e->cb_owner : NULL; /* runtime.lua's tie sets it inside */
  uint64_t serial = e ? e->cb_serial : 0, run = e ? e->cb_run : 0;
  if (e) {
    e->cb_owner = NULL;
    e->cb_run = 0;
  }
  size_t was = ob_pool_arm(pool); /* --max-memory holds for tools' callbacks too */
  int rc = ob_engine_pcall(L, nargs, nres);
  ob_pool_disarm(pool, was);
  int why = w ? ob_watch_leave(w, L, outer) : OB_STOP_NONE;
  if (e) { /* whose callback it was; what was set before it, again */
    lua_State *co = e->cb_owner;
    uint64_t s = e->cb_serial;
    e->cb_owner = owner;
    e->cb_serial = serial;
    e->cb_run = run;
    /* a memory error fails the call that gave the callback: printed and
     * carried on, the callback would come again and fail again, forever; a
     * stop (the slice, a signal) fails it too, or the call waits on */
    if (rc != LUA_OK && ob_co_callback_failed(e, co, s, rc, why)) {
      lua_pop(L, 1);
      return -rc;
    }
  }
  if (rc != LUA_OK) {
    if (e)
      ob_engine_note(e, "callback_error", NULL, "error in a libuv callback of a tool: %s",
                     lua_tostring(L, -1));
    lua_pop(L, 1);
    return -rc;
  }
  return nres == LUA_MULTRET ? lua_gettop(L) - top : nres;
}

/* os.exit for tools: an error of the call (or of the tool file, at load). */
static int tool_exit(lua_State *L) {
  int code = lua_isnoneornil(L, 1) ? 0
             : lua_isboolean(L, 1) ? !lua_toboolean(L, 1)
                                   : (int)luaL_checkinteger(L, 1);
  return luaL_error(L, "os.exit called by a tool (code %d): only the engine ends the process",
                    code);
}

/* --max-memory's default: half the process's address-space or data limit
 * (ulimit -v, ulimit -d) when it has one, else none. Past that limit malloc
 * fails wherever it is, in C or in a library, and the process aborts or
 * panics; the account refuses first, at half, which leaves room for what it
 * does not count (libraries' buffers, a buffer's old copy while it grows,
 * the allocator's free lists). Without such a limit the machine is the
 * limit: a number that fits every machine does not exist, so none is set. */
static size_t default_max_memory(void) {
  size_t least = 0;
  int which[] = {RLIMIT_AS, RLIMIT_DATA};
  for (size_t i = 0; i < sizeof which / sizeof *which; i++) {
    struct rlimit rl;
    if (getrlimit(which[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (!least || rl.rlim_cur < least))
      least = (size_t)rl.rlim_cur;
  }
  return least / 2;
}

/* A tool's warn() (once "@on"): the note "warning". */
static void engine_warn(void *ud, const char *msg) { ob_engine_note(ud, "warning", NULL, "%s", msg); }

void ob_engine_set_note(ob_engine *e, ob_note_fn fn, void *ud) {
  e->note = fn;
  e->note_ud = ud;
}

void ob_engine_note(ob_engine *e, const char *kind, const char *call_id, const char *fmt, ...) {
  if (!e || !e->note)
    return;
  ob_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  ob_buf_vaddf(&b, fmt, ap);
  va_end(ap);
  e->note(e->note_ud, kind, call_id, b.data ? b.data : "");
  ob_buf_free(&b);
}

void ob_engine_set_max_memory(ob_engine *e, size_t bytes) {
  if (!bytes)
    bytes = default_max_memory();
  e->lua_pool->max = bytes;
  e->mem.limit = bytes;
}

/* The room left in L's memory account (SIZE_MAX: no limit). */
static size_t mem_room(lua_State *L) {
  void *ud;
  lua_getallocf(L, &ud);
  ob_mem *m = ud ? ((ob_pool *)ud)->acct : NULL;
  if (!m || !m->limit)
    return SIZE_MAX;
  return m->limit > m->used ? m->limit - m->used : 0;
}

/* Raises "memory limit of N MB reached (--max-memory): <what> M MB" (no
 * position: the traceback says where). */
static int mem_refuse(lua_State *L, const char *what, size_t bytes) {
  void *ud;
  lua_getallocf(L, &ud);
  ob_pool *p = ud;
  if (p->acct)
    p->acct->hit = 1;
  char msg[200]; /* lua_pushfstring knows no %zu */
  snprintf(msg, sizeof msg, OB_MEM_LIMIT_FMT ": %s %zu MB", p->max >> 20, what, bytes >> 20);
  lua_pushstring(L, msg);
  return lua_error(L);
}

/* luv's fs_read with a callback reads into a buffer of `size` bytes and makes
 * a Lua string of it in the libuv callback, where no protected call is: a Lua
 * memory error there is a PANIC of the process. So an asynchronous read that
 * the memory account has no room for (twice: luv's buffer and the string) is
 * refused here, in the tool's protected call, where the error is the call's.
 * A synchronous read runs in the tool's call: the limit holds there anyway. */
static int guarded_fs_read(lua_State *L) {
  int async = 0;
  for (int i = 3; i <= lua_gettop(L); i++)
    async |= lua_type(L, i) == LUA_TFUNCTION;
  if (async && lua_isinteger(L, 2) && lua_tointeger(L, 2) > 0) {
    size_t size = (size_t)lua_tointeger(L, 2), room = mem_room(L);
    if (room != SIZE_MAX && size > room / 2)
      return mem_refuse(L, "uv.fs_read with a callback of", size);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* The length of the JSON text of the Lua value at idx, near enough, counted
 * until it passes cap; *longest is the longest string in it. Deeper than
 * cjson goes (1000) is cjson's error, not counted. */
static size_t json_need(lua_State *L, int idx, int depth, size_t cap, size_t *longest) {
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    size_t n = lua_rawlen(L, idx);
    if (n > *longest)
      *longest = n;
    return n + 2;
  }
  case LUA_TNUMBER: return 32;
  case LUA_TTABLE: {
    if (depth > 1000 || !lua_checkstack(L, 3))
      return 2;
    size_t n = 2;
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      n += json_need(L, -2, depth + 1, cap, longest) + json_need(L, -1, depth + 1, cap, longest) + 2;
      lua_pop(L, 1);
      if (n > cap) {
        lua_pop(L, 1);
        break;
      }
    }
    return n;
  }
  default: return 5;
  }
}

int ob_engine_lua_encode_check(lua_State *L) {
  size_t room = mem_room(L);
  if (room == SIZE_MAX)
    return 0;
  /* lua-cjson's buffer (the C allocator's, outside the account) doubles as
   * it grows, and makes room for 6 bytes a byte of the string it adds */
  size_t longest = 0, text = json_need(L, 1, 0, room / 2, &longest);
  if (text > room / 2 || longest > room / 12 || 2 * text + 6 * longest > room)
    return mem_refuse(L, "cjson.encode of a text over", text);
  return 0;
}

ob_http *ob_engine_http(ob_engine *e, ob_error *err) {
  if (!e->http && (e->http = ob_http_new(e->loop, err))) {
    ob_http_set_max(e->http, e->http_max);
    ob_http_set_max_bytes(e->http, e->http_max_bytes);
    ob_http_set_allow_private(e->http, e->http_allow_private);
    ob_http_set_mem(e->http, &e->mem);
    const char *note = ob_http_take_note();
    if (note)
      ob_engine_note(e, "http", NULL, "%s", note);
  }
  return e->http;
}

ob_engine *ob_engine_new(uv_loop_t *loop, ob_error *err) {
  ob_engine *e = calloc(1, sizeof *e);
  if (!e)
    abort();
  ob_map_init(&e->tools);
  ob_map_init(&e->file_ids);
  e->latent_ref = e->approver_ref = e->runtime_ref = e->prim_ref = LUA_NOREF;
  if (!loop) {
    loop = malloc(sizeof *loop);
    if (!loop || uv_loop_init(loop) != 0) {
      free(loop);
      free(e);
      ob_error_set(err, OB_EINVAL, 0, "cannot start a libuv loop");
      return NULL;
    }
    e->own_loop = 1;
  }
  e->loop = loop;
  e->lua_pool = ob_pool_new();
  if (e->lua_pool) {
    e->lua_pool->acct = &e->mem;
    ob_pool_set_warn(e->lua_pool, engine_warn, e); /* the tools' warn(): a note */
  }
  if (!ob_mem_cur) /* the first engine of a thread: hosts with more switch (ob_mem_use) */
    ob_mem_cur = &e->mem;
  lua_State *L = e->L = e->lua_pool ? ob_pool_new_state(e->lua_pool) : NULL;
  if (!L) {
    ob_engine_free(e);
    ob_error_set(err, OB_ENOMEM, 0, "cannot start Lua");
    return NULL;
  }
  /* calls find themselves through their coroutine's extra space; the main
   * thread (and every coroutine a tool makes, which copies it) holds none */
  *(void **)lua_getextraspace(L) = NULL;
  luaL_openlibs(L);
  /* os.exit would end the host's process from inside a tool: it fails the call */
  lua_getglobal(L, "os");
  lua_pushcfunction(L, tool_exit);
  lua_setfield(L, -2, "exit");
  /* the C library's system could not be stopped: the engine's kills its command with the call */
  lua_pushlightuserdata(L, &e->watch);
  lua_pushcclosure(L, ob_exec_execute, 1);
  lua_setfield(L, -2, "execute");
  lua_pop(L, 1);
  /* calls make many short-lived tables (params, ctx, results): the
   * generational collector handles those for far less than full cycles */
  lua_gc(L, LUA_GCGEN, 0, 0);
  ob_lua_open(L);
  luv_set_loop(L, loop);
  luv_set_callback(L, luv_callback_pcall);
  luaL_requiref(L, "luv", luaopen_luv, 0);
  lua_getfield(L, -1, "fs_read"); /* bounded by the memory account (guarded_fs_read) */
  lua_pushcclosure(L, guarded_fs_read, 1);
  lua_setfield(L, -2, "fs_read");
  lua_pop(L, 1);
  ob_engine_set_max_memory(e, 0); /* the default, until the host sets one */
  if (ob_runtime_open(e, err) != OB_OK) {
    ob_engine_free(e);
    return NULL;
  }
  return e;
}

static void close_handle(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* On the engine's Lua state (protected): counts the libuv handles and
 * requests its tools opened through luv that luv still holds (referenced
 * from the registry until their callbacks ran); with arg 1 true, closes the
 * handles not closing yet, through luv (their close callbacks run into the
 * state, as luv's own close does). */
static int count_tool_uv(lua_State *L) {
  int close = lua_toboolean(L, 1);
  lua_settop(L, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, "uv_handle"); /* 1: the set of luv's handle metatables */
  luaL_getmetatable(L, "uv_req");                  /* 2 */
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "luv"); /* 4 */
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, LUA_REGISTRYINDEX)) {
    if (lua_type(L, -1) == LUA_TUSERDATA && lua_getmetatable(L, -1)) {
      int handle = 0;
      if (lua_istable(L, 1)) {
        lua_pushvalue(L, -1);
        handle = lua_rawget(L, 1) != LUA_TNIL;
        lua_pop(L, 1);
      }
      n += handle || lua_rawequal(L, -1, 2);
      lua_pop(L, 1);
      if (handle && close && lua_istable(L, 4)) {
        lua_getfield(L, 4, "is_closing");
        lua_pushvalue(L, -2);
        lua_call(L, 1, 1);
        int closing = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (!closing) {
          lua_getfield(L, 4, "close");
          lua_pushvalue(L, -2);
          lua_call(L, 1, 0);
        }
      }
    }
    lua_pop(L, 1);
  }
  lua_pushinteger(L, n);
  return 1;
}

size_t ob_engine_uv_pending(ob_engine *e, int close) {
  lua_State *L = e->L;
  if (!L)
    return 0;
  int top = lua_gettop(L);
  lua_pushcfunction(L, count_tool_uv);
  lua_pushboolean(L, close);
  lua_Integer n = lua_pcall(L, 1, 1, 0) == LUA_OK ? lua_tointeger(L, -1) : 0;
  lua_settop(L, top);
  return n > 0 ? (size_t)n : 0;
}

/* A tool file's identity as last read, and the file's stat then: read again only when the
 * file is another one, or was written, since. A worker's journals each record the tool
 * files (thousands a second): a stat each, where reading and hashing them (realpath's
 * lookups, an open, a read) cost a trivial job a fifth of its time. */
typedef struct file_id {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  ob_value *identity;
} file_id;

/* What goes once nothing on the loop can call into the Lua state. */
static void engine_release(ob_engine *e) {
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&e->tools, &i, &me)) {
    ob_tool *t = me->val;
    ob_lua_keys_free(NULL, &t->keys); /* the list goes with the Lua state */
    free(t->name);
    free(t->description);
    free(t->file);
    ob_unref(t->schema_value);
    ob_schema_free(t->schema);
    free(t);
  }
  ob_map_free(&e->tools);
  i = 0;
  while (ob_map_next(&e->file_ids, &i, &me)) {
    file_id *f = me->val;
    ob_unref(f->identity);
    free(f);
  }
  ob_map_free(&e->file_ids);
  if (e->own_loop) {
    /* close whatever tools left open (timers, pipes ...) before Lua goes */
    uv_walk(e->loop, close_handle, NULL);
    uv_run(e->loop, UV_RUN_DEFAULT);
  }

  if (e->L)
    lua_close(e->L); /* the pooled coroutines go with it */
  ob_pool_free(e->lua_pool);
  if (ob_mem_cur == &e->mem)
    ob_mem_cur = NULL;
  free(e->pool);
  free(e->free_slots);
  free(e->sleepers);
  free(e->queue);
  if (e->own_loop) {
    uv_walk(e->loop, close_handle, NULL);
    uv_run(e->loop, UV_RUN_DEFAULT);
    uv_loop_close(e->loop);
    free(e->loop);
  }
  free(e);
}

/* A freed engine on the host's loop whose tools' libuv work was pending: the
 * reaper's close callback releases it when nothing is left; if something is
 * (a request in flight, a handle closed before the reaper was, whose callback
 * comes after its), the reaper ticks from the next turn until nothing is. */
static void reaper_tick(uv_timer_t *t);

static void reaper_closed(uv_handle_t *h) {
  ob_engine *e = h->data;
  if (!ob_engine_uv_pending(e, 1)) {
    free(h);
    engine_release(e);
    return;
  }
  uv_timer_t *t = (uv_timer_t *)h; /* a closed handle may be made again */
  uv_timer_init(e->loop, t);
  t->data = e;
  uv_timer_start(t, reaper_tick, 0, 1);
}

static void reaper_tick(uv_timer_t *t) {
  if (!ob_engine_uv_pending(t->data, 1))
    uv_close((uv_handle_t *)t, reaper_closed);
}

void ob_engine_free_begin(ob_engine *e) {
  if (!e || e->reaper || e->own_loop || !ob_engine_uv_pending(e, 0))
    return;
  e->reaper = malloc(sizeof *e->reaper);
  if (!e->reaper)
    abort();
  uv_timer_init(e->loop, e->reaper);
  e->reaper->data = e;
  uv_close((uv_handle_t *)e->reaper, reaper_closed);
}

void ob_engine_free(ob_engine *e) {
  if (!e)
    return;
  /* On a host's loop, luv would call back into a freed state for the handles
   * and requests tools left: the handles are closed now, while the state
   * lives, and the reaper lets it go once luv is done with them. The reaper
   * is closed first, so that its callback comes after theirs (libuv runs the
   * handles closed before a turn's close phase last-closed first): then the
   * state goes in the loop's next turn. */
  ob_http_free(e->http); /* every transfer ends, and no callback of one comes */
  e->http = NULL;
  ob_engine_free_begin(e);
  ob_runtime_close(e); /* the runs first: their calls hold tools' references */
  if (e->reaper) {
    ob_engine_uv_pending(e, 1);
    return;
  }
  engine_release(e);
}

int ob_engine_has_latent(const ob_engine *e) { return e->latent_ref != LUA_NOREF; }

static int by_string(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

ob_value *ob_file_identity(const char *path) {
  ob_buf b;
  ob_buf_init(&b);
  ob_error err;
  char *abs = realpath(path, NULL); /* the same file from another folder is the same */
  ob_value *o = ob_object_set(ob_object(), "file", 4, ob_cstring(abs ? abs : path));
  free(abs);
  if (ob_read_file(path, &b, &err) == OB_OK) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)ob_fnv1a64(b.data, b.len));
    o = ob_object_set(o, "size", 4, ob_int((int64_t)b.len));
    o = ob_object_set(o, "hash", 4, ob_cstring(hex));
  }
  ob_buf_free(&b);
  return o;
}

static ob_value *tool_file_identity(ob_engine *e, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return ob_file_identity(path); /* gone: said so by what it holds (no hash) */
  file_id *f = ob_map_get(&e->file_ids, path, strlen(path));
  if (f && f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
      f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec)
    return ob_ref(f->identity);
  if (!f) {
    f = ob_xcalloc(1, sizeof *f);
    ob_map_put(&e->file_ids, path, strlen(path), f);
  }
  ob_unref(f->identity);
  f->dev = st.st_dev;
  f->ino = st.st_ino;
  f->size = st.st_size;
  f->mtime = st.st_mtim;
  f->identity = ob_file_identity(path);
  return ob_ref(f->identity);
}

ob_value *ob_engine_tool_files(const ob_engine *e) {
  size_t n = 0, i = 0;
  const char **files = ob_xmalloc((e->tools.n + 1) * sizeof *files);
  ob_map_entry *me;
  while (ob_map_next((ob_map *)&e->tools, &i, &me)) {
    const ob_tool *t = me->val;
    if (t->fn)
      continue; /* a C tool: the host's, no file */
    size_t k = 0;
    while (k < n && strcmp(files[k], t->file))
      k++;
    if (k == n)
      files[n++] = t->file;
  }
  qsort(files, n, sizeof *files, by_string);
  ob_value *list = ob_array();
  for (size_t k = 0; k < n; k++) /* the cache is no part of what the engine is */
    list = ob_array_push(list, tool_file_identity((ob_engine *)e, files[k]));
  free(files);
  return list;
}

/* --- tools -------------------------------------------------------------------- */

/* Where a tool table was written: the line of its run function, when known. */
/* What is wrong with a tool's name as Lua holds it (n bytes), or NULL: a plan names
 * its tool in JSON text, which holds neither a NUL (the C name would be cut short:
 * "marker\0x" registered as marker) nor bytes that are not UTF-8. */
static const char *name_problem(const char *name, size_t n) {
  if (memchr(name, '\0', n))
    return "holds a NUL byte (\\u0000): no plan can name such a tool";
  for (size_t k = 0; k < n;) {
    const unsigned char *u = (const unsigned char *)name + k;
    size_t len = *u < 0x80 ? 1 : ob_utf8_seq(u, n - k);
    if (!len)
      return "is not valid UTF-8: no plan can name such a tool";
    k += len;
  }
  return NULL;
}

static int tool_line(lua_State *L, int idx) {
  int line = 0;
  lua_getfield(L, idx, "run");
  if (lua_isfunction(L, -1)) {
    lua_Debug ar;
    lua_getinfo(L, ">S", &ar);
    line = ar.linedefined > 0 ? ar.linedefined : 0;
  } else {
    lua_pop(L, 1);
  }
  return line;
}

/* A tool's schema: strict (unknown keywords and formats refused, ob_schema.h) unless
 * the engine is lenient. A schema refused only for being strict says how to let it
 * through. */
static ob_schema *tool_schema_compile(const ob_engine *e, const ob_value *schema, ob_error *err) {
  ob_schema *s = ob_schema_compile_with(schema, e->lenient_schemas ? 0 : OB_SCHEMA_STRICT, err);
  if (s || e->lenient_schemas)
    return s;
  ob_schema *lenient = ob_schema_compile(schema, NULL);
  if (lenient && err) {
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len, "; or --lenient-schemas lets it through");
  }
  ob_schema_free(lenient);
  return NULL;
}

/* The keys a tool table may have (plan-format §9); a key beginning with "x_" is the author's
 * own (a latent handler gets the table). */
static const char *const tool_keys[] = {"name", "description", "schema", "run"};

/* The first key of the tool table at idx that is none of those, described in b (with
 * the known key it is nearest: "shema" for "schema"); 0 when there is none. */
static int unknown_tool_key(lua_State *L, int idx, ob_buf *b) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1); /* the value */
    size_t n = 0;
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    int known = 0;
    for (size_t i = 0; k && i < sizeof tool_keys / sizeof *tool_keys; i++)
      known |= !strcmp(k, tool_keys[i]);
    if (known || (k && n > 2 && !strncmp(k, "x_", 2)))
      continue;
    const char *near = k && strlen(k) == n ? ob_suggest(k, tool_keys, 4) : NULL;
    if (k)
      ob_buf_addf(b, "unknown key \"%.*s\"", (int)(n > 60 ? 60 : n), k);
    else
      ob_buf_addf(b, "a key that is not a name (a %s)", luaL_typename(L, -1));
    if (near)
      ob_buf_addf(b, " (did you mean \"%s\"?)", near);
    else
      ob_buf_addf(b, " (a tool table has name, description, schema and run; keys of your "
                     "own begin with x_)");
    lua_pop(L, 1);
    return 1;
  }
  return 0;
}

/* Registers the tool table at the top of the stack (which it pops). */
static int register_tool(ob_engine *e, const char *file, int nth, ob_error *err) {
  lua_State *L = e->L;
  int idx = lua_gettop(L), rc = OB_OK;
  char where[64];
  int line = lua_istable(L, idx) ? tool_line(L, idx) : 0;
  if (line)
    snprintf(where, sizeof where, "%d: tool #%d", line, nth);
  else
    snprintf(where, sizeof where, " tool #%d", nth);
  if (!lua_istable(L, idx)) {
    lua_pop(L, 1);
    return ob_error_set(err, OB_EINVAL, 0, "%s:%s: a tool is a table, not a %s", file, where,
                        luaL_typename(L, idx));
  }
  lua_getfield(L, idx, "name");
  lua_getfield(L, idx, "description");
  lua_getfield(L, idx, "run");
  lua_getfield(L, idx, "schema");
  /* lua_tostring would turn a number into a string in place: check the type first */
  size_t name_n = 0;
  const char *name = lua_type(L, idx + 1) == LUA_TSTRING ? lua_tolstring(L, idx + 1, &name_n) : NULL;
  const char *bad_name = !name || !name_n ? "must be a non-empty string" : name_problem(name, name_n);
  ob_buf key; /* an unknown key first: "nmae" says more than a missing name */
  ob_buf_init(&key);
  if (unknown_tool_key(L, idx, &key)) {
    if (bad_name)
      rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s: %s", file, where, key.data);
    else
      rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s (%s): %s", file, where, name, key.data);
  } else if (bad_name) {
    rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s: \"name\" %s", file, where, bad_name);
  } else if (!lua_isnil(L, idx + 2) && lua_type(L, idx + 2) != LUA_TSTRING) {
    rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s (%s): \"description\" must be a string", file,
                      where, name);
  } else if (!lua_isnil(L, idx + 3) && !lua_isfunction(L, idx + 3)) {
    rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s (%s): \"run\" must be a function", file, where,
                      name);
  } else {
    const ob_tool *twin = ob_map_get(&e->tools, name, strlen(name));
    if (twin)
      rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s: the tool \"%s\" is already defined in %s",
                        file, where, name, twin->file);
  }
  ob_buf_free(&key);
  ob_value *schema = NULL;
  ob_schema *compiled = NULL;
  if (rc == OB_OK && !lua_isnil(L, idx + 4)) {
    ob_error e2;
    schema = ob_lua_to_value_named(L, idx + 4, "schema", &e2);
    if (!schema)
      rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s (%s): %s", file, where, name, e2.msg);
    else if (!(compiled = tool_schema_compile(e, schema, &e2)))
      rc = ob_error_set(err, OB_EINVAL, 0, "%s:%s (%s): the schema is not usable: %s", file,
                        where, name, e2.msg);
  }
  if (rc != OB_OK) {
    ob_unref(schema);
    lua_settop(L, idx - 1);
    return rc;
  }
  ob_tool *t = calloc(1, sizeof *t);
  if (!t)
    abort();
  t->name = ob_xstrdup(name);
  t->description = lua_isnil(L, idx + 2) ? NULL : ob_xstrdup(lua_tostring(L, idx + 2));
  t->file = ob_xstrdup(file);
  t->schema_value = schema;
  t->schema = compiled;
  t->latent = lua_isnil(L, idx + 3);
  lua_pushvalue(L, idx + 3);
  t->run_ref = t->latent ? (lua_pop(L, 1), LUA_NOREF) : luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, idx);
  t->table_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  ob_map_put(&e->tools, t->name, strlen(t->name), t);
  lua_settop(L, idx - 1);
  return OB_OK;
}

static int load_lua_file(ob_engine *e, const char *file, int is_tools, ob_error *err) {
  lua_State *L = e->L;
  int top = lua_gettop(L);
  if (ob_file_check_regular(file, err) != OB_OK) /* a FIFO named *.lua would hang */
    return OB_EIO;
  if (luaL_loadfile(L, file) != LUA_OK) {
    /* Lua's message already reads "file:line: ..." */
    ob_error_set(err, OB_EINVAL, 0, "%s", lua_tostring(L, -1));
    lua_settop(L, top);
    return OB_EINVAL;
  }
  if (ob_engine_pcall(L, 0, 1) != LUA_OK) {
    ob_error_set(err, OB_EINVAL, 0, "%s: error while loading: %s", file, lua_tostring(L, -1));
    lua_settop(L, top);
    return OB_EINVAL;
  }
  if (!is_tools) {
    lua_settop(L, top);
    return OB_OK;
  }
  int rc = OB_OK, list = lua_istable(L, -1);
  if (list) { /* a tool table has a name or a run; anything else is a list */
    lua_getfield(L, -1, "name");
    lua_getfield(L, -2, "run");
    list = lua_isnil(L, -1) && lua_isnil(L, -2) && luaL_len(L, -3) > 0;
    lua_pop(L, 2);
  }
  if (!list) {
    rc = register_tool(e, file, 1, err);
  } else {
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; rc == OB_OK && i <= n; i++) {
      lua_geti(L, -1, i);
      rc = register_tool(e, file, (int)i, err);
    }
  }
  lua_settop(L, top);
  return rc;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lets tool files require modules kept beside them: dir/?.lua and
 * dir/?/init.lua go first in package.path (once per folder). */
static void add_to_path(ob_engine *e, const char *dir) {
  lua_State *L = e->L;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  const char *old = lua_tostring(L, -1);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "%s/?.lua;%s/?/init.lua;", dir, dir);
  if (!old || !strstr(old, b.data)) {
    ob_buf_add(&b, old ? old : "", old ? strlen(old) : 0);
    lua_pushstring(L, b.data);
    lua_setfield(L, -3, "path");
  }
  lua_pop(L, 2);
  ob_buf_free(&b);
}

int ob_engine_load_tools(ob_engine *e, const char *path, ob_error *err) {
  struct stat st;
  if (stat(path, &st) != 0)
    return ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? ob_xstrndup(path, (size_t)(slash - path)) : ob_xstrdup(".");
    add_to_path(e, dir);
    free(dir);
    return load_lua_file(e, path, 1, err);
  }
  add_to_path(e, path);
  DIR *d = opendir(path);
  if (!d)
    return ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(errno));
  size_t n = 0, cap = 0;
  char **names = NULL;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    if (len < 5 || strcmp(de->d_name + len - 4, ".lua") || de->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 16;
      names = realloc(names, cap * sizeof *names);
      if (!names)
        abort();
    }
    size_t plen = strlen(path) + len + 2;
    names[n] = malloc(plen);
    if (!names[n])
      abort();
    snprintf(names[n++], plen, "%s/%s", path, de->d_name);
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, by_name);
  int rc = OB_OK;
  for (size_t i = 0; i < n; i++) {
    if (rc == OB_OK)
      rc = load_lua_file(e, names[i], 1, err);
    free(names[i]);
  }
  free(names);
  return rc;
}

int ob_engine_add_tool(ob_engine *e, const char *name, const ob_value *schema, ob_tool_fn fn,
                       void *data, ob_error *err) {
  if (!name || !*name || !fn)
    return ob_error_set(err, OB_EINVAL, 0, "a C tool needs a name and a function");
  const ob_tool *twin = ob_map_get(&e->tools, name, strlen(name));
  if (twin)
    return ob_error_set(err, OB_EINVAL, 0, "the tool \"%s\" is already defined in %s", name,
                        twin->file);
  ob_schema *compiled = NULL;
  if (schema && !(compiled = tool_schema_compile(e, schema, err)))
    return err ? err->code : OB_EINVAL;
  ob_tool *t = calloc(1, sizeof *t);
  if (!t)
    abort();
  t->name = ob_xstrdup(name);
  t->file = ob_xstrdup("(C)");
  t->schema_value = ob_ref((ob_value *)schema);
  t->schema = compiled;
  t->run_ref = t->table_ref = LUA_NOREF;
  t->fn = fn;
  t->fn_data = data;
  ob_map_put(&e->tools, t->name, strlen(t->name), t);
  return OB_OK;
}

int ob_engine_load_script(ob_engine *e, const char *path, ob_error *err) {
  return load_lua_file(e, path, 0, err);
}
