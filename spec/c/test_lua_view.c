/* test_lua_view.c -- read-only views (ob_view.c) through a real lua_State: which values of a
 * call's params become views (judged on the params resolved), a view converted back is its very value (no copy), a view
 * keeps its value alive, and writes raise (run under ASan: nothing leaks, nothing dangles). */
#include <lauxlib.h>
#include <lualib.h>

#include "bridge/ob_lua.h"
#include "base/ob_path.h"
#include "bridge/ob_view.h"
#include "test.h"
#include "testlua.h"

/* {"k1":1,...,"k<n>":n} */
static ob_value *object_of(int n) {
  ob_value *o = ob_object();
  char key[16];
  for (int i = 1; i <= n; i++) {
    snprintf(key, sizeof key, "k%d", i);
    o = ob_object_set(o, key, strlen(key), ob_int(i));
  }
  return o;
}

/* Runs chunk with the value at the top as global v (popped); returns what it returns as a
 * string (or the error). */
static const char *run(lua_State *L, const char *chunk) {
  static char out[512];
  lua_setglobal(L, "v");
  if (luaL_dostring(L, chunk) != LUA_OK)
    snprintf(out, sizeof out, "error: %s", lua_tostring(L, -1));
  else
    snprintf(out, sizeof out, "%s", luaL_tolstring(L, -1, NULL));
  lua_settop(L, 0);
  return out;
}

TEST(the_cut_off_counts_entries_at_every_depth) {
  ob_value *o63 = object_of(63), *o64 = object_of(64);
  CHECK(!ob_view_big(o63));
  CHECK(ob_view_big(o64));
  ob_value *in62 = ob_object_set(ob_object(), "a", 1, object_of(62)); /* 1 + 62 */
  ob_value *in63 = ob_object_set(ob_object(), "a", 1, object_of(63)); /* 1 + 63 */
  CHECK(!ob_view_big(in62));
  CHECK(ob_view_big(in63));
  ob_value *arr = ob_array();
  for (int i = 0; i < 64; i++)
    arr = ob_array_push(arr, ob_null());
  CHECK(ob_view_big(arr));
  CHECK(!ob_view_big(ob_array()));
  CHECK(!ob_view_big(ob_object()));
  ob_value *s = ob_cstring("a string of more than sixty-four bytes, which is no container at all");
  CHECK(!ob_view_big(s));
  ob_unref(s);
  ob_unref(arr);
  ob_unref(in62);
  ob_unref(in63);
  ob_unref(o63);
  ob_unref(o64);
}

TEST(a_view_converted_back_is_its_own_value) {
  lua_State *L = new_state();
  ob_value *big = object_of(100);
  ob_view_push(L, big);
  ob_error err;
  ob_value *back = ob_lua_to_value(L, -1, &err);
  CHECK(back == big); /* a reference, not a copy */
  ob_unref(back);
  /* inside a table, and a view of a value inside it */
  lua_setglobal(L, "v");
  CHECK(luaL_dostring(L, "return { whole = v, list = { v, 1 } }") == LUA_OK);
  back = ob_lua_to_value(L, -1, &err);
  CHECK(back && ob_object_get(back, "whole", 5) == big);
  CHECK(back && ob_array_get(ob_object_get(back, "list", 4), 0) == big);
  ob_unref(back);
  lua_settop(L, 0);
  ob_value *outer = ob_object_set(ob_object(), "inner", 5, ob_ref(big));
  ob_view_push(L, outer);
  lua_getfield(L, -1, "inner");
  back = ob_lua_to_value(L, -1, &err);
  CHECK(back == big);
  ob_unref(back);
  ob_unref(outer);
  ob_unref(big);
  lua_close(L);
}

TEST(a_view_keeps_its_value_alive) {
  lua_State *L = new_state();
  ob_value *big = object_of(100);
  ob_view_push(L, big);
  ob_unref(big); /* the view holds the only reference now */
  CHECK_STR(run(L, "collectgarbage(); local n = 0; for k, x in pairs(v) do n = n + x end; "
                   "return n .. ' ' .. v.k7"),
            "5050 7");
  lua_gc(L, LUA_GCCOLLECT); /* the view goes, and the value with it (ASan: no leak) */
  lua_close(L);
}

TEST(writes_raise_and_totable_copies) {
  lua_State *L = new_state();
  ob_value *big = parse("{\"a\":[1,2.0,null],\"b\":{},\"pad\":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
                        "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
                        "0,0,0,0,0,0,0,0,0,0,0,0,0]}");
  ob_view_push(L, big);
  CHECK_STR(run(L, "v.a[1] = 5"),
            "error: [string \"v.a[1] = 5\"]:1: obelus: params are read-only; use obelus.totable(v) "
            "for a copy you can change");
  ob_view_push(L, big);
  CHECK_STR(run(L, "local core = require 'obelus.core'; local t = core.totable(v); t.a[1] = 5; "
                   "return type(t) .. ' ' .. tostring(core.is_view(v)) .. ' ' .. t.a[1] .. ' ' .. "
                   "v.a[1] .. ' ' .. math.type(t.a[2]) .. ' ' .. core.encode(core.totable(v))"),
            "table object 5 1 float {\"a\":[1,2.0,null],\"b\":{},\"pad\":[0,0,0,0,0,0,0,0,0,0,0,0,"
            "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,"
            "0,0,0,0,0,0,0,0,0,0,0,0,0]}");
  ob_unref(big);
  lua_close(L);
}

/* ob_lua_push_call: views for big values below the root, judged as resolved. */
TEST(push_call_makes_views_of_big_values_as_resolved) {
  lua_State *L = new_state();
  ob_value *big = object_of(70), *small = object_of(3);
  /* lit resolves to 2 + 3 + 70 entries: a view; few to 1 + 3: a table */
  ob_value *raw = parse("{\"_tool\":\"t\",\"doc\":\"\xE2\x80\xA0input.doc\","
                        "\"lit\":{\"x\":\"\xE2\x80\xA0input.small\",\"y\":\"\xE2\x80\xA0input.doc\"},"
                        "\"few\":{\"x\":\"\xE2\x80\xA0input.small\",\"e\":\"\xE2\x80\xA0\xE2\x80\xA0" "e\"},"
                        "\"_outputPath\":\"\xE2\x80\xA0state.r\"}");
  ob_value *vals[] = {big, small, big, small}; /* in the order the references are written */
  ob_lua_keys keys = {0};
  ob_lua_push_call(L, raw, vals, 4, 1, &keys, NULL);
  CHECK_STR(run(L, "return type(v) .. ' ' .. type(v.doc) .. ' ' .. type(v.lit) .. ' ' .. "
                   "type(v.lit.x) .. ' ' .. v.lit.y.k70 .. ' ' .. type(v.few) .. ' ' .. "
                   "type(v.few.x) .. ' ' .. v.few.x.k3 .. ' ' .. v.few.e .. ' ' .. v._outputPath"),
            "table userdata userdata userdata 70 table table 3 \xE2\x80\xA0" "e \xE2\x80\xA0state.r");
  /* params resolved already (a later attempt): the same rule, no substitution */
  ob_value *params = ob_object_set(ob_object_set(ob_object(), "big", 3, ob_ref(big)), "small", 5,
                                   ob_ref(small));
  ob_lua_push_call(L, params, NULL, 0, 0, &keys, NULL);
  CHECK_STR(run(L, "return type(v.big) .. ' ' .. type(v.small) .. ' ' .. #v.big"), "userdata table 0");
  ob_lua_keys_free(L, &keys);
  ob_unref(params);
  ob_unref(raw);
  ob_unref(big);
  ob_unref(small);
  lua_close(L);
}

int main(void) {
  RUN(the_cut_off_counts_entries_at_every_depth);
  RUN(a_view_converted_back_is_its_own_value);
  RUN(a_view_keeps_its_value_alive);
  RUN(writes_raise_and_totable_copies);
  RUN(push_call_makes_views_of_big_values_as_resolved);
  return TEST_END();
}
