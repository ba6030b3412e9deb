/* ob_exec.h -- os.execute as tools get it: the command runs in a process group
 * of its own and the wait for it can be stopped (ob_exec.c). */
#ifndef OB_EXEC_H
#define OB_EXEC_H

#include <lua.h>

/* os.execute([cmd]): Lua 5.4's results (true when a shell exists; true|nil,
 * "exit"|"signal", code), but the command is killed with its group when the
 * engine's watch stops the running Lua code or a SIGINT/SIGTERM came. */
int ob_exec_execute(lua_State *L);
/* Its one upvalue: where the engine keeps its watch (a light userdata, ob_watch **;
 * NULL: no watch, only signals stop the wait). The engine installs it so, and this
 * file needs nothing of the engine's. */

#endif
