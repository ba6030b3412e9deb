/* ob_lua_scalar.h -- a JSON scalar pushed as the Lua value the bridge gives it (plan-format §9).
 * Shared by the bridge (ob_lua.c) and the views (ob_view.c), so that a scalar read
 * through a view is the very value ob_lua_push would have given, while ob_view.c need
 * not include ob_lua.h (ob_lua.c includes ob_view.h: the include graph between the two
 * goes one way). Static inline: a switch and one lua_push*, no call, no set-up. */
#ifndef OB_LUA_SCALAR_H
#define OB_LUA_SCALAR_H

#include <lua.h>

#include "base/ob_value.h"

/* Pushes the scalar v (borrowed): null as obelus.null (the light userdata NULL), false
 * and true as booleans, an integer as a Lua integer, a real as a float, a string as a
 * Lua string (NUL bytes kept). A container pushes nil: callers push those otherwise.
 * Raises nothing but a Lua memory error (a string's copy). */
static inline void ob_lua_push_scalar(lua_State *L, const ob_value *v) {
  switch (ob_typeof(v)) {
  case OB_NULL: lua_pushlightuserdata(L, NULL); break;
  case OB_FALSE: lua_pushboolean(L, 0); break;
  case OB_TRUE: lua_pushboolean(L, 1); break;
  case OB_INT: lua_pushinteger(L, (lua_Integer)ob_int_value(v)); break;
  case OB_REAL: lua_pushnumber(L, (lua_Number)ob_real_value(v)); break;
  case OB_STRING: lua_pushlstring(L, ob_string_ptr(v), ob_string_len(v)); break;
  default: lua_pushnil(L); break; /* not reached: containers go elsewhere */
  }
}

#endif
