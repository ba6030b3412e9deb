/* ob_http_lua.h -- obelus.http's C half for the runtime (ob_http_lua.c). */
#ifndef OB_HTTP_LUA_H
#define OB_HTTP_LUA_H

#include <lua.h>

/* prim.http_start(opts, done) -> transfer; upvalue 1: the engine. */
int ob_http_lua_start(lua_State *L);

#endif
