/* ob_luamod_queue.h -- obelus.queue, the Lua module's job queue (ob_luamod_queue.c).
 * The queue needs two things of the module's engines, which it gets as hooks rather
 * than by including ob_luamod.h: the module includes this file, never the reverse. */
#ifndef OB_LUAMOD_QUEUE_H
#define OB_LUAMOD_QUEUE_H

#include <lua.h>

#include "engine/ob_engine.h"

/* What obelus.queue asks of the module's engines. Both must be set; the struct must
 * outlive every lua_State the queue is opened in (the module's is a static const). */
typedef struct ob_luamod_hooks {
  /* The engine of the obelus.engine at idx (raises for anything else, or a closed one). */
  ob_engine *(*check_engine)(lua_State *L, int idx);
  /* Non-zero while a callback of one of this state's engines runs (the loop is on the
   * C stack: turning it again is not allowed). */
  int (*busy)(lua_State *L);
} ob_luamod_hooks;

/* Adds `queue` to the module table at the top of the stack, and its class. h is kept
 * (as an upvalue of obelus.queue, then in each queue), not copied. */
void ob_luamod_queue_open(lua_State *L, const ob_luamod_hooks *h);

#endif
