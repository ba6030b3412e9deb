/* testlua.h -- what the tests of the Lua bridge and of views share: a JSON value
 * parsed (or the test aborts), and a Lua state made as a host makes it. */
#ifndef OB_TESTLUA_H
#define OB_TESTLUA_H

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/ob_lua.h"
#include "host/ob_luamod.h"

static ob_value *parse(const char *json) {
  ob_error err;
  ob_value *v = ob_json_parse(json, strlen(json), &err);
  if (!v) {
    fprintf(stderr, "  bad test JSON: %s\n", err.msg);
    abort();
  }
  return v;
}

/* A state as a host makes it: obelus.core preloaded from the linked library. */
static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  ob_lua_open(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_obelus_core);
  lua_setfield(L, -2, "obelus.core");
  lua_pop(L, 1);
  return L;
}

#endif
