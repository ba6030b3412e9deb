/* ob_view.h -- read-only views: a big JSON value handed to Lua without copying it (ob_view.c).
 * A call's params that are big objects or arrays reach the tool as views (plan-format §9, docs/tools.md). */
#ifndef OB_VIEW_H
#define OB_VIEW_H

#include <lua.h>

#include "base/ob_value.h"

/* A container whose entries, counted at every depth, reach this many is handed to a
 * tool as a view; smaller ones are tables (the measurements: ob_view.c's first comment). */
#define OB_VIEW_MIN 64

/* 1 when v (any value) is an object or array big enough to be a view. Costs at most
 * OB_VIEW_MIN steps, whatever v's size. */
int ob_view_big(const ob_value *v);
/* v's entries at every depth (0 for a scalar), counted until they reach limit. */
size_t ob_view_count(const ob_value *v, size_t limit);

/* Pushes a view of v (an object or array; borrowed: the view takes its own reference).
 * May raise a Lua memory error (nothing leaks: the reference is taken last). */
void ob_view_push(lua_State *L, const ob_value *v);

/* Pushes a view with no value yet and returns where its value goes: a reference stored
 * there belongs to the view (so that a value made after the view, which can no longer
 * fail, cannot leak). Until then the view shows nothing and is no view to
 * ob_view_value. May raise a Lua memory error. */
ob_value **ob_view_push_slot(lua_State *L);

/* The value of the view at idx (borrowed, alive while the view is), or NULL when the
 * value there is not a view. Never raises, allocates nothing, pushes nothing. */
ob_value *ob_view_value(lua_State *L, int idx);

/* The Lua functions of obelus (runtime and obelus.core); totable(v), the deep copy of a
 * view, is the bridge's (ob_lua_totable in ob_lua.h):
 *   is_view(v)  "array" or "object" when v is a view (of one), else false
 *   next(t, k)  next for views and tables alike (plain next refuses a userdata) */
int ob_view_lua_is_view(lua_State *L);
int ob_view_lua_next(lua_State *L);

#endif
