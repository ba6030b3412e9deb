/* ob_cli_stdio.c -- the files an engine's tools write to, made the CLI's: Lua's print,
 * io.write and io.output(), io.stdout and io.stderr over the streams the progress line
 * makes (ob_progress.c), which erase the line before they write.
 *
 * Design
 * ------
 * A Lua file handle (luaL_Stream, lauxlib.h) over the host's FILE*, which a tool cannot
 * close, as Lua's own io.stdout: its closef refuses and marks it open again. print is
 * Lua's own but writes to out rather than the C library's stdout. Set before the tools
 * load (a tool file may keep io.stdout), on each engine of the command (a run on threads
 * has one per thread: the streams take a lock). It touches the engine's Lua state, as
 * only its host may: an embedding host with a console of its own can do the same.
 *
 * Costs: two userdata and a closure per engine, once; a write costs what the stream's
 * does. */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>

#include "cli/ob_cli.h"
#include "engine/ob_engine.h"

static int stdio_noclose(lua_State *L) {
  luaL_Stream *p = luaL_checkudata(L, 1, LUA_FILEHANDLE);
  p->closef = stdio_noclose;
  luaL_pushfail(L);
  lua_pushliteral(L, "cannot close standard file");
  return 2;
}

static void stdio_push(lua_State *L, FILE *f) {
  luaL_Stream *p = lua_newuserdatauv(L, sizeof *p, 0);
  p->f = f;
  p->closef = stdio_noclose;
  luaL_setmetatable(L, LUA_FILEHANDLE);
}

static int stdio_print(lua_State *L) {
  FILE *out = lua_touserdata(L, lua_upvalueindex(1));
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    if (i > 1)
      fputc('\t', out);
    fwrite(s, 1, len, out);
    lua_pop(L, 1);
  }
  fputc('\n', out);
  fflush(out);
  return 0;
}

void ob_cli_engine_stdio(ob_engine *e, FILE *out, FILE *err) {
  lua_State *L = e->L;
  lua_getglobal(L, "io");
  if (out) {
    stdio_push(L, out);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "_IO_output"); /* io.write's (liolib's IO_OUTPUT) */
    lua_setfield(L, -2, "stdout");
    lua_pushlightuserdata(L, out);
    lua_pushcclosure(L, stdio_print, 1);
    lua_setglobal(L, "print");
  }
  if (err) {
    stdio_push(L, err);
    lua_setfield(L, -2, "stderr");
  }
  lua_pop(L, 1);
}
