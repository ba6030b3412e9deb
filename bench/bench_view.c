/* bench_view.c -- a value handed to Lua as tables against the same value as a view, by
 * size: the measurements behind OB_VIEW_MIN (core/bridge/ob_view.h), one JSON line per size.
 *   obelus-bench cutoff   for n = 4 .. 2048 entries (counted at every depth) and three
 *                         shapes (an object of n integers, an array of n integers, an
 *                         array of n/5 records of 4 fields), the time to hand the value
 *                         to a Lua function and have it read one entry ("one") or walk
 *                         every entry with pairs ("all"), as tables (the bridge's copy)
 *                         and as a view, in ns; medians of 5 interleaved measurements,
 *                         each of enough repetitions to walk ~500,000 entries.
 * A plain lua_State (no engine): only the handing over and the reading are compared. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bridge/ob_lua.h"
#include "bridge/ob_view.h"

int ob_bench_cutoff(void);

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* one(v, shape, i): one entry; all(v): every scalar, walked with pairs */
static const char readers[] =
    "local function all(t)\n"
    "  local c = 0\n"
    "  for _, v in pairs(t) do\n"
    "    if type(v) == 'number' or type(v) == 'string' then c = c + 1 else c = c + all(v) end\n"
    "  end\n"
    "  return c\n"
    "end\n"
    "local function one(t, shape, i)\n"
    "  if shape == 'object' then return t['k' .. i] end\n"
    "  if shape == 'array' then return t[i + 1] end\n"
    "  return t[i + 1].name\n"
    "end\n"
    "return one, all\n";

static ob_value *make(const char *shape, size_t n) {
  char key[32];
  if (!strcmp(shape, "object")) {
    ob_value *o = ob_object();
    for (size_t i = 0; i < n; i++) {
      snprintf(key, sizeof key, "k%zu", i);
      o = ob_object_set(o, key, strlen(key), ob_int((int64_t)i));
    }
    return o;
  }
  ob_value *a = ob_array();
  if (!strcmp(shape, "array")) {
    for (size_t i = 0; i < n; i++)
      a = ob_array_push(a, ob_int((int64_t)i));
    return a;
  }
  for (size_t i = 0; i < n / 5; i++) {
    ob_value *r = ob_object_set(ob_object(), "id", 2, ob_int((int64_t)i));
    snprintf(key, sizeof key, "user %zu", i);
    r = ob_object_set(r, "name", 4, ob_cstring(key));
    r = ob_object_set(r, "age", 3, ob_int(30));
    r = ob_object_set(r, "city", 4, ob_cstring("Lisbon"));
    a = ob_array_push(a, r);
  }
  return a;
}

/* ns for handing v over (as a view or as tables) and reading it reps times */
static double measure(lua_State *L, const ob_value *v, int as_view, int all, const char *shape,
                      size_t mid, size_t reps) {
  lua_gc(L, LUA_GCCOLLECT);
  double t0 = now_ns();
  for (size_t r = 0; r < reps; r++) {
    lua_pushvalue(L, all ? 2 : 1);
    if (as_view)
      ob_view_push(L, v);
    else
      ob_lua_push(L, v);
    if (all) {
      lua_call(L, 1, 1);
    } else {
      lua_pushstring(L, shape);
      lua_pushinteger(L, (lua_Integer)mid);
      lua_call(L, 3, 1);
    }
    lua_pop(L, 1);
  }
  return (now_ns() - t0) / (double)reps;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int ob_bench_cutoff(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  ob_lua_open(L);
  if (luaL_loadbuffer(L, readers, sizeof readers - 1, "=readers") != LUA_OK ||
      lua_pcall(L, 0, 2, 0) != LUA_OK) {
    fprintf(stderr, "obelus-bench cutoff: %s\n", lua_tostring(L, -1));
    return 2;
  }
  static const char *const shapes[] = {"object", "array", "records"};
  enum { ROUNDS = 5 };
  for (size_t s = 0; s < 3; s++) {
    for (size_t n = 4; n <= 2048; n *= 2) {
      if (!strcmp(shapes[s], "records") && n < 10)
        continue;
      ob_value *v = make(shapes[s], n);
      size_t reps = (1u << 19) / n, mid = !strcmp(shapes[s], "records") ? n / 10 : n / 2;
      double t[4][ROUNDS];
      for (int r = 0; r < ROUNDS; r++)
        for (int m = 0; m < 4; m++) /* interleaved: table one, view one, table all, view all */
          t[m][r] = measure(L, v, m & 1, m >> 1, shapes[s], mid, reps);
      for (int m = 0; m < 4; m++)
        qsort(t[m], ROUNDS, sizeof(double), by_value);
      printf("{\"bench\":\"cutoff\",\"shape\":\"%s\",\"n\":%zu,\"table_one_ns\":%.0f,"
             "\"view_one_ns\":%.0f,\"table_all_ns\":%.0f,\"view_all_ns\":%.0f}\n",
             shapes[s], n, t[0][ROUNDS / 2], t[1][ROUNDS / 2], t[2][ROUNDS / 2],
             t[3][ROUNDS / 2]);
      fflush(stdout);
      ob_unref(v);
    }
  }
  lua_close(L);
  return 0;
}
