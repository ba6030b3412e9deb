/* ob_runtime.h -- where the engine meets the scheduler (ob_runtime.c, ob_co.c): the
 * engine calls these and nothing else of the scheduler's, and includes no other
 * header of it. */
#ifndef OB_RUNTIME_H
#define OB_RUNTIME_H

#include <lua.h>
#include <stdint.h>

#include "base/ob_error.h"

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

/* A tool's libuv callback given by attempt serial of coroutine co ended with
 * Lua error st, or was stopped by the watch (why: OB_STOP_*, ob_watch.h): a
 * memory error fails that attempt ("memory limit of N MB reached
 * (--max-memory)"), a stop fails it as the stop of its own resume would (the
 * slice, its _timeout; a signal lets go of it), its handles closed, and
 * returns 1; so does either for an attempt already over (a callback queued
 * before it failed: nothing to fail, said once); another error returns 0. */
int ob_co_callback_failed(struct ob_engine *e, lua_State *co, uint64_t serial, int st, int why);

#endif
