/* ob_luamod.h -- what the Lua module's files share (ob_luamod.c: engines, runs,
 * logs; ob_luamod_queue.c: obelus.queue). */
#ifndef OB_LUAMOD_H
#define OB_LUAMOD_H

#include <lauxlib.h>
#include <lua.h>

#include "ob_engine.h"

/* The Lua module `obelus.core`: what `require "obelus.core"` runs when
 * lib/obelus/core.so is loaded; a host linking the library can put it in
 * package.preload instead. */
int luaopen_obelus_core(lua_State *L);
/* The engine of the obelus.engine at idx (raises for anything else, or a closed one). */
ob_engine *ob_luamod_check_engine(lua_State *L, int idx);
/* Non-zero while a callback of one of this state's engines runs (the loop is on the
 * C stack: turning it again is not allowed). */
int ob_luamod_busy(lua_State *L);
/* Makes the metatable `name`: methods as __index, and __gc, __close, __tostring. */
void ob_luamod_new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                         lua_CFunction gc, lua_CFunction close, lua_CFunction tostring);
/* Adds `queue` to the module table at the top of the stack, and its class. */
void ob_luamod_queue_open(lua_State *L);

#endif
