/* ob_luamod.h -- the Lua module obelus.core (ob_luamod.c: engines, runs, logs;
 * obelus.queue is ob_luamod_queue.c's, which gets what it needs of the engines as
 * hooks: ob_luamod_queue.h). */
#ifndef OB_LUAMOD_H
#define OB_LUAMOD_H

#include <lauxlib.h>
#include <lua.h>

#include "engine/ob_engine.h"

/* The Lua module `obelus.core`: what `require "obelus.core"` runs when
 * lib/obelus/core.so is loaded; a host linking the library can put it in
 * package.preload instead. */
__attribute__((visibility("default"))) int luaopen_obelus_core(lua_State *L);

#endif
