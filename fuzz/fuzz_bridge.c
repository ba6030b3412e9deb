/* fuzz_bridge.c -- libFuzzer target: the Lua bridge (ob_lua.c), both ways.
 *
 * JSON -> Lua -> value: when the input parses, pushing it to Lua and converting it
 * back must succeed and give the same value, as JSON text (fidelity: 1 and 1.0 apart,
 * keys in their order).
 * Lua -> value -> JSON -> value: the input is also read as a small program that builds
 * Lua values on a stack (integers, any double, strings of any bytes, tables filled with
 * any keys, the array metatable, a table stored into itself...). Whatever the bridge
 * accepts from the stack must be a value the journal can hold: printed as JSON, it
 * parses back (no NUL in a key, valid UTF-8, finite numbers) to the same value, when
 * it is no deeper than a journal's message may be (2040 levels: ob_write.c refuses
 * deeper results). What it refuses it refuses with an error, never a crash. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ob_lua.h"

static void must(int ok, const char *what, const char *detail) {
  if (!ok) {
    fprintf(stderr, "fuzz_bridge: %s: %s\n", what, detail ? detail : "");
    abort();
  }
}

/* The value printed, parsed back, must be itself. */
static void round_trip(const ob_value *v, const char *what) {
  size_t len;
  char *text = ob_json_print(v, OB_JSON_COMPACT, &len);
  ob_error err;
  ob_value *back = ob_json_parse(text, len, &err);
  must(back != NULL, what, err.msg);
  must(ob_identical(v, back), what, text);
  ob_unref(back);
  free(text);
}

static void from_json(lua_State *L, const unsigned char *data, size_t size) {
  ob_error err;
  ob_value *v = ob_json_parse((const char *)data, size, &err);
  if (!v)
    return;
  int top = lua_gettop(L);
  if (ob_lua_push_safe(L, v, &err) == OB_OK) {
    ob_value *back = ob_lua_to_value(L, -1, &err);
    must(back != NULL, "a parsed value did not come back from Lua", err.msg);
    must(ob_identical(v, back), "a parsed value came back from Lua changed", NULL);
    ob_unref(back);
  }
  lua_settop(L, top);
  ob_unref(v);
}

static uint64_t take(const unsigned char **p, const unsigned char *end, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n && *p < end; i++)
    x = x << 8 | *(*p)++;
  return x;
}

static void from_program(lua_State *L, const unsigned char *p, const unsigned char *end) {
  int base = lua_gettop(L);
  lua_checkstack(L, 80);
  while (p < end) {
    int n = lua_gettop(L) - base;
    unsigned op = *p++ % 11;
    if (n >= 64 && op <= 3)
      op = 9;
    switch (op) {
    case 0: lua_pushinteger(L, (lua_Integer)take(&p, end, 1 + (p < end ? *p % 8 : 0))); break;
    case 1: {
      uint64_t bits = take(&p, end, 8);
      double d;
      memcpy(&d, &bits, sizeof d);
      lua_pushnumber(L, d);
      break;
    }
    case 2: {
      size_t len = (size_t)take(&p, end, 1) % 24;
      if (len > (size_t)(end - p))
        len = (size_t)(end - p);
      lua_pushlstring(L, (const char *)p, len);
      p += len;
      break;
    }
    case 3: lua_newtable(L); break;
    case 4: /* t[k] = v, with t, k, v the top three (raw: no metamethods) */
      if (n >= 3 && lua_istable(L, -3) && !lua_isnil(L, -2) &&
          !(lua_type(L, -2) == LUA_TNUMBER && lua_tonumber(L, -2) != lua_tonumber(L, -2)))
        lua_rawset(L, -3);
      else if (n)
        lua_pop(L, 1);
      break;
    case 5: /* append the top to the table below it */
      if (n >= 2 && lua_istable(L, -2))
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
      break;
    case 6:
      if (n && lua_istable(L, -1)) {
        ob_lua_push_array_mt(L);
        lua_setmetatable(L, -2);
      }
      break;
    case 7: {
      unsigned k = (unsigned)take(&p, end, 1) % 3;
      if (k == 2)
        lua_pushlightuserdata(L, NULL);
      else
        lua_pushboolean(L, (int)k);
      break;
    }
    case 8: /* a copy of an element below: a table may end up inside itself */
      if (n)
        lua_pushvalue(L, base + 1 + (int)(take(&p, end, 1) % (unsigned)n));
      break;
    case 9:
      if (n)
        lua_pop(L, 1);
      break;
    case 10: /* a deep chain: t = {t} a few hundred times */
      if (n && lua_istable(L, -1)) {
        int times = (int)(take(&p, end, 2) % 5000);
        for (int i = 0; i < times; i++) {
          lua_createtable(L, 1, 0);
          lua_insert(L, -2);
          lua_rawseti(L, -2, 1);
        }
      }
      break;
    }
  }
  for (int i = lua_gettop(L); i > base; i--) {
    ob_error err;
    ob_value *v = ob_lua_to_value_named(L, i, "result", &err);
    if (v) { /* deeper ones are taken (up to OB_MAX_DEPTH) but never written: ob_write.c */
      must(ob_depth(v) <= OB_MAX_DEPTH, "a value deeper than OB_MAX_DEPTH was taken", NULL);
      if (ob_depth(v) <= 2040)
        round_trip(v, "a value the bridge took does not read back from JSON");
      ob_unref(v);
    } else {
      must(err.msg[0] != '\0', "a refusal without a message", NULL);
    }
  }
  lua_settop(L, base);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  static lua_State *L;
  if (!L) {
    L = luaL_newstate();
    ob_lua_open(L);
  }
  from_json(L, data, size);
  from_program(L, data, data + size);
  lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
