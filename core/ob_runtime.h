/* ob_runtime.h -- where the engine meets the scheduler (ob_runtime.c): the engine
 * calls these two and nothing else of the scheduler's. */
#ifndef OB_RUNTIME_H
#define OB_RUNTIME_H

#include <lua.h>

#include "ob_error.h"

struct ob_engine;

/* Builds the `obelus` module, the calls' coroutine body and the watch into
 * the engine's fresh Lua state. OB_OK, or an error code with err filled. */
int ob_runtime_open(struct ob_engine *e, ob_error *err);
/* Frees the engine's runs and closes the scheduler's handles (their memory
 * goes when the loop gets to their close callbacks). */
void ob_runtime_close(struct ob_engine *e);

/* The engine of a Lua state (any of its threads), from its registry; NULL
 * before ob_runtime_open. */
struct ob_engine *ob_co_engine(lua_State *L);
void ob_co_set_engine(lua_State *L, struct ob_engine *e);

#endif
