/* test_lua_bridge.c -- the Lua bridge through a real lua_State: round trips are exact, Lua
 * changes never reach the C value, errors name their place and free everything (run under ASan). */
#include <lauxlib.h>
#include <lualib.h>

#include "bridge/ob_lua.h"
#include "test.h"
#include "testlua.h"

/* The compact JSON text of v in a static buffer. */
static const char *text(const ob_value *v) {
  static char out[8192];
  char *s = ob_json_print(v, OB_JSON_COMPACT, NULL);
  snprintf(out, sizeof out, "%s", s);
  free(s);
  return out;
}

/* Runs a chunk; it sees the value at the top of the stack as `v`, and its
 * result replaces it. */
static void run(lua_State *L, const char *chunk) {
  lua_setglobal(L, "v");
  if (luaL_dostring(L, chunk) != LUA_OK) {
    fprintf(stderr, "  Lua error: %s\n", lua_tostring(L, -1));
    abort();
  }
}

/* Converts the value at the top, pops it, and returns the result's text or
 * the error message. */
static const char *convert_top(lua_State *L, int *code) {
  static char out[8192];
  ob_error err = {0};
  int top = lua_gettop(L);
  ob_value *v = ob_lua_to_value_named(L, -1, "result", &err);
  CHECK_INT(lua_gettop(L), top); /* never leaves anything on the stack */
  lua_pop(L, 1);
  if (code)
    *code = v ? OB_OK : err.code;
  if (!v) {
    CHECK(err.code < 0);
    snprintf(out, sizeof out, "%s", err.msg);
    return out;
  }
  snprintf(out, sizeof out, "%s", text(v));
  ob_unref(v);
  return out;
}

/* v pushed to a fresh state and read back is the same value. */
static void check_round_trip(const ob_value *v) {
  lua_State *L = new_state();
  ob_lua_push(L, v);
  ob_error err;
  ob_value *back = ob_lua_to_value(L, -1, &err);
  CHECK(back && ob_identical(v, back));
  ob_unref(back);
  lua_close(L);
}

TEST(round_trip_is_identical) {
  static const char *texts[] = {
      "null", "true", "false", "0", "-1", "1.0", "-0.0", "1e+300", "2.5e-308", "0.1",
      "9223372036854775807", "-9223372036854775808", "\"\"", "\"a\\u0000b\"",
      "\"\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f\"", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"",
      "[]", "{}", "[[]]", "[{}]", "{\"a\":[]}", "{\"a\":{}}",
      "{\"z\":1,\"a\":2,\"m\":{\"y\":[1,2.0,null,true],\"b\":{}}}",
      "[{\"a\":1,\"b\":2},{\"b\":1,\"a\":2},{\"a\":1,\"b\":2,\"c\":3},{\"a\":1},{},{\"a\":1,\"b\":2}]",
      "[{\"u\":{\"a\":1,\"b\":2}},{\"u\":{\"b\":3,\"a\":4}},{\"u\":{\"a\":5,\"b\":6}},{\"u\":{}}]",
      "[{\"a long key of more than forty bytes, not interned\":1,\"b\":[{\"x\":{\"y\":1}}]},"
      "{\"a long key of more than forty bytes, not interned\":2,\"b\":[{\"x\":{\"y\":2}}]}]",
      "{\"k9\":0,\"k8\":1,\"k7\":2,\"k6\":3,\"k5\":4,\"k4\":5,\"k3\":6,\"k2\":7,\"k1\":8,\"k0\":9,"
      "\"\":10,\"a b\":11}",
  };
  lua_State *L = new_state();
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    ob_value *v = parse(texts[i]);
    int top = lua_gettop(L);
    ob_lua_push(L, v);
    CHECK_INT(lua_gettop(L), top + 1);
    ob_error err;
    ob_value *back = ob_lua_to_value(L, -1, &err);
    CHECK(back != NULL);
    if (back) {
      CHECK(ob_identical(v, back));
      CHECK_STR(text(back), text(v));
    }
    lua_pop(L, 1);
    ob_unref(back);
    ob_unref(v);
  }
  lua_close(L);
}

TEST(wide_objects_keep_their_order) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addc(&b, '{');
  for (int i = 0; i < 300; i++) /* wider than the key cache and the small-object form */
    ob_buf_addf(&b, "%s\"key%d\":[%d,{\"x%d\":%d}]", i ? "," : "", (i * 7919) % 300, i, i % 5, i);
  ob_buf_addc(&b, '}');
  ob_value *v = parse(b.data);
  ob_buf_free(&b);
  check_round_trip(v);
  ob_unref(v);
}

TEST(lua_types_map_exactly) {
  lua_State *L = new_state();
  lua_newtable(L);
  lua_pushinteger(L, 1);
  lua_setfield(L, -2, "i");
  lua_pushnumber(L, 1.0);
  lua_setfield(L, -2, "f");
  lua_pushnumber(L, -0.0);
  lua_setfield(L, -2, "z");
  lua_pushinteger(L, LUA_MAXINTEGER);
  lua_setfield(L, -2, "max");
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  lua_pushlstring(L, "a\0b", 3);
  lua_setfield(L, -2, "nul");
  CHECK_STR(convert_top(L, NULL),
            "{\"f\":1.0,\"i\":1,\"max\":9223372036854775807,\"nul\":\"a\\u0000b\",\"null\":null,\"z\":-0.0}");
  lua_close(L);
}

TEST(lua_changes_never_reach_the_c_value) {
  ob_value *v = parse("{\"a\":[1,2],\"o\":{\"x\":1}}");
  lua_State *L = new_state();
  ob_lua_push(L, v);
  run(L, "v.a[1] = 99; v.o.x = nil; v.o.y = 2; v.new = true; return v");
  CHECK_STR(text(v), "{\"a\":[1,2],\"o\":{\"x\":1}}");
  CHECK_STR(convert_top(L, NULL), "{\"a\":[99,2],\"o\":{\"y\":2},\"new\":true}");
  ob_unref(v);
  lua_close(L);
}

TEST(added_keys_come_after_original_keys_sorted) {
  ob_value *v = parse("[{\"z\":1,\"m\":2,\"a\":3},{\"z\":1,\"m\":2,\"a\":3},{\"z\":1,\"m\":2,\"a\":3}]"), *v2;
  lua_State *L = new_state();
  ob_lua_push(L, v);
  /* the three records share one key list: changing one must not touch the others */
  run(L, "v[2].q = 1; v[2].b = 2; v[2].m = nil; v[3].z = nil; v[3].z = 5; return v");
  CHECK_STR(convert_top(L, NULL), "[{\"z\":1,\"m\":2,\"a\":3},{\"z\":1,\"a\":3,\"b\":2,\"q\":1},"
                                  "{\"z\":5,\"m\":2,\"a\":3}]");
  /* objects at one depth under different parents share a key list too */
  v2 = parse("[{\"u\":{\"z\":1,\"a\":2}},{\"u\":{\"z\":3,\"a\":4}}]");
  ob_lua_push(L, v2);
  run(L, "v[1].u.m = 0; v[2].u.z = nil; return v");
  CHECK_STR(convert_top(L, NULL), "[{\"u\":{\"z\":1,\"a\":2,\"m\":0}},{\"u\":{\"a\":4}}]");
  /* a decoded object the tool turned into a list becomes an array */
  ob_lua_push(L, v2);
  run(L, "local u = v[1].u; u.z, u.a = nil, nil; u[1], u[2] = 'x', 'y'; return u");
  CHECK_STR(convert_top(L, NULL), "[\"x\",\"y\"]");
  ob_lua_push(L, v2);
  run(L, "local u = v[1].u; u[1] = 'x'; return u");
  CHECK_STR(convert_top(L, NULL), "result: cannot convert a table with both string and integer keys to JSON (key 1)");
  ob_unref(v2);
  /* a table built in Lua has no recorded order: sorted bytewise */
  lua_pushnil(L);
  run(L, "return { b = 1, a = 2, ['B'] = 3, ['a\\1'] = 4, [''] = 5 }");
  CHECK_STR(convert_top(L, NULL), "{\"\":5,\"B\":3,\"a\":2,\"a\\u0001\":4,\"b\":1}");
  ob_unref(v);
  lua_close(L);
}

/* Converts what `chunk` returns and checks the error code and message. */
static void check_error(lua_State *L, const char *chunk, int code, const char *msg) {
  lua_pushnil(L);
  run(L, chunk);
  int got;
  const char *out = convert_top(L, &got);
  CHECK_INT(got, code);
  if (!strstr(out, msg))
    fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", out, msg);
  CHECK(strstr(out, msg) != NULL);
}

TEST(errors_name_the_place_and_free_everything) {
  lua_State *L = new_state();
  /* big partial values built before each error: LeakSanitizer checks they are freed */
  const char *prefix = "local core = require 'obelus.core'; local big = {}; for i = 1, 200 do "
                       "big[i] = { name = 'n' .. i, list = core.array{ i, i + 0.5, 'x' } } end; ";
  char chunk[1024];
#define ERR(body, code, msg)                                                         \
  do {                                                                               \
    snprintf(chunk, sizeof chunk, "%s%s", prefix, body);                             \
    check_error(L, chunk, code, msg);                                                \
  } while (0)
  ERR("return { a = big, items = { 1, 2, print } }", OB_ETYPE,
      "result.items[3]: cannot convert a function to JSON");
  ERR("return { a = big, co = coroutine.create(print) }", OB_ETYPE, "result.co: cannot convert a thread");
  ERR("return { a = big, u = io.stdout }", OB_ETYPE, "result.u: cannot convert a userdata");
  ERR("return { big, { x = 0/0 } }", OB_ETYPE, "result[2].x: cannot convert NaN");
  ERR("return { big, { x = 1/0 } }", OB_ETYPE, "result[2].x: cannot convert inf");
  ERR("return { big, { ['a b'] = { -1/0 } } }", OB_ETYPE, "result[2][\"a b\"][1]: cannot convert -inf");
  ERR("return { a = big, m = { 1, 2, x = 3 } }", OB_EINVAL, "result.m: cannot convert a table with both");
  ERR("return { a = big, s = { [1] = 1, [2] = 2, [4] = 4 } }", OB_EINVAL, "result.s: cannot convert a sparse array");
  ERR("return { a = big, s = { [0] = 1 } }", OB_EINVAL, "result.s: cannot convert a sparse array");
  ERR("return { a = big, f = { [1.5] = 1 } }", OB_EINVAL, "result.f: cannot convert a table with key 1.5");
  ERR("return { a = big, b = { [true] = 1 } }", OB_EINVAL, "result.b: cannot convert a table with a boolean key");
  ERR("return { a = big, h = core.array{ 1, nil, 3 } }", OB_EINVAL, "result.h[2]: nil in an array");
  ERR("local t = core.array{ 1, 2 }; t.x = 1; return { a = big, t = t }", OB_EINVAL,
      "result.t: cannot convert an array with key \"x\"");
  ERR("return { a = big, s = 'ok\\xff' }", OB_EINVAL, "result.s: cannot convert a string that is not valid UTF-8");
  ERR("return { a = big, ['\\xc0\\x80'] = 1 }", OB_EINVAL, "result: key \"\xc0\x80\" is not valid UTF-8");
  ERR("return { a = big, s = '\\xed\\xa0\\x80' }", OB_EINVAL, "not valid UTF-8"); /* a surrogate */
#undef ERR
  lua_pushnil(L);
  run(L, "return { n = { nil }, e = {} }"); /* {nil} is an empty table: {} */
  CHECK_STR(convert_top(L, NULL), "{\"e\":{},\"n\":{}}");
  check_error(L, "return nil", OB_ETYPE, "result: cannot convert nil to JSON");
  /* a key JSON text cannot carry: the journal could not read it back */
  check_error(L, "return { x = { ['a\\0b'] = 1 } }", OB_EINVAL,
              "result.x: key \"a\\u0000b\" holds a NUL byte (no JSON object key can)");
  check_error(L, "return print", OB_ETYPE, "result: cannot convert a function");
  lua_close(L);
}

TEST(changed_recorded_objects_convert_errors_too) {
  ob_value *v = parse("{\"a\":{\"b\":[{\"c\":1}]}}");
  lua_State *L = new_state();
  ob_lua_push(L, v);
  run(L, "v.a.b[1].c = print; return v"); /* recorded keys unchanged: the in-order path */
  CHECK_STR(convert_top(L, NULL), "result.a.b[1].c: cannot convert a function to JSON");
  ob_lua_push(L, v);
  run(L, "v.a.b[1].d = print; return v"); /* a key added: the sorting path */
  CHECK_STR(convert_top(L, NULL), "result.a.b[1].d: cannot convert a function to JSON");
  ob_unref(v);
  lua_close(L);
}

TEST(deep_and_cyclic_tables_are_errors_not_crashes) {
  lua_State *L = new_state();
  char chunk[256];
  snprintf(chunk, sizeof chunk, "local t = {} for i = 2, %d do t = { t } end return t", OB_MAX_DEPTH);
  lua_pushnil(L);
  run(L, chunk);
  ob_error err;
  ob_value *deep = ob_lua_to_value(L, -1, &err); /* exactly OB_MAX_DEPTH levels: fine */
  lua_pop(L, 1);
  CHECK(deep != NULL);
  if (deep) {
    CHECK_INT(ob_depth(deep), OB_MAX_DEPTH);
    ob_lua_push(L, deep); /* and back again */
    ob_value *again = ob_lua_to_value(L, -1, &err);
    CHECK(again && ob_identical(deep, again));
    ob_unref(again);
    lua_pop(L, 1);
  }
  ob_unref(deep);
  snprintf(chunk, sizeof chunk, "local t = {} for i = 1, %d do t = { x = t } end return t", OB_MAX_DEPTH);
  check_error(L, chunk, OB_EDEPTH, "nested deeper than 4096 levels");
  check_error(L, chunk, OB_EDEPTH, "result.x.x.x.x"); /* a long place is cut: */
  check_error(L, chunk, OB_EDEPTH, "x.x[...].x.x");
  /* a cycle is refused where the table is met again, at once */
  check_error(L, "local t = { 1, 2 } t[3] = { a = t } return { root = t }", OB_EDEPTH,
              "result.root[3].a: a table that contains itself cannot be converted to JSON");
  check_error(L, "local t = {} t.self = t return t", OB_EDEPTH,
              "result.self: a table that contains itself");
  /* a table held twice side by side is no cycle: it is written twice */
  check_error(L, "local x = { 1 } return { a = x, b = { x, x } }", 0, "{\"a\":[1],\"b\":[[1],[1]]}");
  lua_close(L);
}

TEST(deep_c_values_push) {
  ob_value *v = ob_int(7);
  for (int i = 0; i < OB_MAX_DEPTH; i++)
    v = i % 2 ? ob_array_push(ob_array(), v) : ob_object_set(ob_object(), "k", 1, v);
  check_round_trip(v);
  ob_unref(v);
}

TEST(is_array_and_the_metatable) {
  lua_State *L = new_state();
  ob_value *v = parse("[[],{}]");
  ob_lua_push(L, v);
  CHECK(ob_lua_is_array(L, -1));
  lua_rawgeti(L, -1, 1);
  CHECK(ob_lua_is_array(L, -1));
  lua_rawgeti(L, -2, 2);
  CHECK(!ob_lua_is_array(L, -1));
  lua_getmetatable(L, -2);
  luaL_getmetatable(L, OB_LUA_ARRAY_MT);
  CHECK(lua_rawequal(L, -1, -2));
  lua_settop(L, 0);
  lua_pushinteger(L, 1);
  CHECK(!ob_lua_is_array(L, -1));
  lua_pop(L, 1);
  ob_unref(v);
  lua_close(L);
}

/* Two engines in one process: each state has its own metatable and records. */
TEST(two_states_are_independent) {
  lua_State *a = new_state(), *b = new_state();
  ob_value *v = parse("{\"z\":[],\"a\":1}");
  ob_lua_push(a, v);
  ob_lua_push(b, v);
  luaL_getmetatable(a, OB_LUA_ARRAY_MT);
  luaL_getmetatable(b, OB_LUA_ARRAY_MT);
  CHECK(lua_topointer(a, -1) != lua_topointer(b, -1));
  lua_pop(a, 1);
  lua_pop(b, 1);
  lua_close(a); /* b still converts its copy, order and all */
  lua_gc(b, LUA_GCCOLLECT);
  CHECK_STR(convert_top(b, NULL), "{\"z\":[],\"a\":1}");
  ob_unref(v);
  lua_close(b);
}

/* An allocator with a budget, to make Lua run out of memory on purpose. */
typedef struct budget {
  size_t used, limit;
} budget;

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  budget *b = ud;
  if (!ptr)
    osize = 0;
  if (nsize == 0) {
    b->used -= osize;
    free(ptr);
    return NULL;
  }
  if (nsize > osize && b->used + (nsize - osize) > b->limit)
    return NULL;
  void *p = realloc(ptr, nsize);
  if (p)
    b->used += nsize - osize;
  return p;
}

TEST(push_safe_reports_out_of_memory) {
  budget bud = {0, 1 << 20};
  lua_State *L = lua_newstate(limited_alloc, &bud);
  luaL_openlibs(L);
  ob_lua_open(L);
  ob_value *big = ob_array();
  for (int i = 0; i < 20000; i++)
    big = ob_array_push(big, parse("{\"name\":\"a fairly long string value\",\"n\":[1,2,3]}"));
  ob_value *small = parse("{\"ok\":[1]}");
  ob_error err;
  int top = lua_gettop(L);
  CHECK_INT(ob_lua_push_safe(L, big, &err), OB_ENOMEM);
  CHECK_INT(lua_gettop(L), top); /* nothing pushed */
  lua_gc(L, LUA_GCCOLLECT);
  CHECK_INT(ob_lua_push_safe(L, small, &err), OB_OK);
  ob_value *back = ob_lua_to_value(L, -1, &err);
  CHECK(back && ob_identical(back, small));
  ob_unref(back);
  ob_unref(small);
  ob_unref(big);
  lua_close(L);
}

int main(void) {
  RUN(round_trip_is_identical);
  RUN(wide_objects_keep_their_order);
  RUN(lua_types_map_exactly);
  RUN(lua_changes_never_reach_the_c_value);
  RUN(added_keys_come_after_original_keys_sorted);
  RUN(errors_name_the_place_and_free_everything);
  RUN(changed_recorded_objects_convert_errors_too);
  RUN(deep_and_cyclic_tables_are_errors_not_crashes);
  RUN(deep_c_values_push);
  RUN(is_array_and_the_metatable);
  RUN(two_states_are_independent);
  RUN(push_safe_reports_out_of_memory);
  return TEST_END();
}
