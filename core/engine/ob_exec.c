/* ob_exec.c -- os.execute for tools: Lua's results, but a command that can be
 * stopped with the call that runs it.
 *
 * Lua's os.execute is the C library's system, which cannot be stopped: it
 * ignores SIGINT and SIGQUIT in the caller while it waits (a second Ctrl-C
 * could not exit at once), its command runs in obelus's own process group
 * (`timeout 2 obelus run` signals that group, killing the command, whose call
 * then settled done before the loop took the signal), and its wait is a
 * waitpid that SA_RESTART handlers resume, so neither the watchdog's stop
 * (a tool's _timeout, --max-slice) nor one SIGINT/SIGTERM reached the tool
 * before the command ended on its own.
 *
 * So the engine's os.execute (ob_engine.c puts it in place of Lua's) starts
 * `/bin/sh -c -- CMD` with posix_spawn in a process group of its own, every
 * signal's disposition default and the mask empty in the child, the
 * environment as is (stdio flushed first, as callers of the C library's system expect). The
 * group is tracked with ob_watch_child_add while the command runs, so the
 * second signal's exit at once and the end of the run kill it. The wait is a
 * poll() on a pidfd: poll is never restarted, so a handled signal (the
 * watchdog's OB_WATCH_SIGNAL sent to this thread when a stop is due, a
 * SIGINT, a SIGTERM) wakes it; it also wakes every quarter second, for a
 * signal another thread took. At each wake-up, when the engine's watch has a
 * stop pending for the running resume (OB_STOP_*: its handler set the stop
 * and a count hook of 1) or a SIGINT/SIGTERM came (ob_watch_interrupted),
 * the command's group gets SIGKILL and is reaped, and os.execute returns
 * (nil, "signal", 9) to Lua, where the hook raises the stop at the next
 * instruction: the call fails or is abandoned exactly as a spinning tool's
 * is. A signal's stop is set here (with the hook) when the watchdog has not
 * set it yet, so that no instruction of the tool runs first as if the
 * command had ended. Outside a watched resume (a tool file running it while
 * it loads) there is no stop, only the signal's kill. Where pidfd_open is
 * missing (Linux before 5.3), the wait is waitpid(WNOHANG) between sleeps of
 * 1 ms growing to 50 ms (nanosleep is never restarted either).
 *
 * Results are Lua 5.4's (luaL_execresult): os.execute() is true when
 * /bin/sh can be run; os.execute(cmd) is true|nil, "exit"|"signal", code. A
 * shell that cannot be started is an exit of 127, as the C library's system says it.
 *
 * Costs: one posix_spawn (vfork-like, as glibc's system), a pidfd and a
 * wake-up every 250 ms while the command runs. What the command leaves in its
 * group after it ends is no longer tracked (the C library's system left it in obelus's
 * group). The command is in a background group: one that reads the terminal
 * is stopped by SIGTTIN (and is then killed at --max-slice). io.popen is still
 * Lua's. Linux (pidfd), glibc (posix_spawn's SETSIGDEF). */
#include <errno.h>
#include <lauxlib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/ob_exec.h"
#include "bridge/ob_watch.h"

extern char **environ;

#define EXEC_SHELL "/bin/sh"
#define EXEC_WAKE_MS 250 /* a signal another thread took is seen within this */

/* Starts `sh -c -- cmd` in a group of its own: 0, or an errno. */
static int exec_spawn(const char *cmd, pid_t *pid) {
  posix_spawnattr_t attr;
  int rc = posix_spawnattr_init(&attr);
  if (rc)
    return rc;
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                           POSIX_SPAWN_SETSIGMASK);
  if (!rc)
    rc = posix_spawnattr_setpgroup(&attr, 0);
  if (!rc)
    rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (!rc)
    rc = posix_spawnattr_setsigmask(&attr, &none);
  char *argv[] = {"sh", "-c", "--", (char *)cmd, NULL};
  if (!rc)
    rc = posix_spawn(pid, EXEC_SHELL, NULL, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  return rc;
}

static int exec_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec always */
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

/* Whether the wait must end now: the watch's stop of the running resume, or a
 * SIGINT/SIGTERM (OB_STOP_*). A signal's stop is set here when the watchdog
 * has not set it yet; the hook goes on L (the Lua thread that called). */
static int exec_stop_due(lua_State *L, ob_watch *w) {
  int sig = atomic_load(&ob_watch_interrupted);
  if (!w || !atomic_load_explicit(&w->co, memory_order_acquire))
    return sig ? OB_STOP_SIGNAL : OB_STOP_NONE; /* no resume watched: nothing to raise */
  int why = atomic_load(&w->stop);
  if (!why && sig) {
    atomic_store(&w->stop, OB_STOP_SIGNAL);
    why = OB_STOP_SIGNAL;
  }
  if (why)
    lua_sethook(L, w->hook, LUA_MASKCOUNT, 1);
  return why;
}

/* Waits for the command pid (tracked in slot) to end, or until a stop is
 * due (then kills its group first). Its wait status, or -1 with errno. */
static int exec_wait(lua_State *L, pid_t pid, _Atomic(pid_t) *slot) {
  ob_watch *const *wp = lua_touserdata(L, lua_upvalueindex(1)); /* the engine's */
  ob_watch *w = wp ? *wp : NULL;
  int fd = exec_pidfd(pid);
  long nap_ns = 1000000L;
  for (;;) {
    if (exec_stop_due(L, w)) { /* first too: a stop may have come before the command */
      kill(-pid, SIGKILL); /* the group: what the command started goes with it */
      break;
    }
    if (fd >= 0) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      int n = poll(&p, 1, EXEC_WAKE_MS);
      if (n > 0)
        break; /* ended: a zombie until reaped */
      if (n < 0 && errno != EINTR && errno != EAGAIN) {
        close(fd); /* cannot poll: wait as the fallback does */
        fd = -1;
      }
    } else {
      int status;
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        ob_watch_child_remove(slot);
        return status;
      }
      if (r < 0 && errno != EINTR) {
        ob_watch_child_remove(slot);
        return -1; /* not ours to wait for any more (a host reaped it) */
      }
      struct timespec nap = {0, nap_ns};
      nanosleep(&nap, NULL);
      if (nap_ns < 50000000L)
        nap_ns *= 2;
    }
  }
  if (fd >= 0)
    close(fd);
  /* the leader is a zombie or dying: its pid, the group's id, is not reused
   * before it is reaped */
  ob_watch_child_remove(slot);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return status;
}

int ob_exec_execute(lua_State *L) {
  const char *cmd = luaL_optstring(L, 1, NULL);
  if (!cmd) {
    lua_pushboolean(L, access(EXEC_SHELL, X_OK) == 0);
    return 1;
  }
  fflush(NULL);
  pid_t pid;
  int status;
  if (exec_spawn(cmd, &pid) != 0) {
    status = W_EXITCODE(127, 0); /* as the C library's system says a shell that cannot start */
    errno = 0;
  } else {
    _Atomic(pid_t) *slot = ob_watch_child_add(pid);
    errno = 0;
    status = exec_wait(L, pid, slot);
    if (status != -1)
      errno = 0;
  }
  return luaL_execresult(L, status);
}
