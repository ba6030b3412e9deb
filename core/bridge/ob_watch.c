/* ob_watch.c -- the watchdog thread and its signal, the SIGINT/SIGTERM handler
 * in front of libuv's, and the tools' children's groups (see ob_watch.h). */
#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bridge/ob_watch.h"

/* `life` serialises making and giving back watches, which start and stop the
 * thread: it runs while some engine has a watch, so that a process whose
 * engines are all freed has no thread of ours left (valgrind, hosts). */
static pthread_mutex_t life = PTHREAD_MUTEX_INITIALIZER;
static int installed; /* 1 the handler is ours, 2 parked (ignored, by us), -1 someone else's */
static int running, nactive;  /* the thread; the watches in use (both under life) */
static pthread_t thread;
/* the thread's: the watches, and when to stop */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* wakes the watchdog: a semaphore, since sem_post is async-signal-safe */
static sem_t wake;
static int wake_made;
static int stopping;
static ob_watch *watches; /* every watch ever made, active or not */

static ob_watch_say_fn stuck_say; /* ob_watch_exit_stuck's (NULL: never exit) */
static void *stuck_ud;
static int exit_at;           /* the signal that exits at once (0: none) */

atomic_int ob_watch_interrupted;

static unsigned long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000u + (unsigned long long)ts.tv_nsec / 1000000u;
}

/* On the loop thread, between two Lua instructions or in a system call: only
 * async-signal-safe work (lua_sethook is, as lua.c relies on). */
static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  ob_watch *w = si->si_value.sival_ptr;
  if (!w || si->si_code != SI_QUEUE)
    return;
  lua_State *co = atomic_load_explicit(&w->co, memory_order_acquire);
  if (co && atomic_load(&w->resumes) == atomic_load(&w->target)) {
    int why = atomic_load(&w->want);
    if (!atomic_load(&w->stop) || why == OB_STOP_SIGNAL)
      atomic_store(&w->stop, why);
    lua_sethook(co, w->hook, LUA_MASKCOUNT, 1); /* again, if it was: it may have gone */
  }
}

/* The sampling period: a quarter of the shortest limit in force, 5 ms at
 * least and 250 ms at most (deadlines and signals are seen within it); 0
 * when no watch has a limit (sleep until woken). While a SIGINT or SIGTERM
 * waits for the loop to take it, SIGNAL_RESEND_MS at most: the stop is sent
 * again at every sample until the Lua it stops returns, as an overdue
 * timeout's is (one stop that did not take, its hook gone by the time it
 * came, left an approver spinning with nothing to send it another). */
#define SIGNAL_RESEND_MS 50
static unsigned long long period_ms(void) {
  unsigned long long p = atomic_load(&ob_watch_interrupted) ? SIGNAL_RESEND_MS : 0;
  for (ob_watch *w = watches; w; w = w->next) {
    unsigned lim = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
    unsigned long long q = lim / 4 < 5 ? 5 : lim / 4 > 250 ? 250 : lim / 4;
    if (w->active && lim && (!p || q < p))
      p = q;
  }
  return p;
}

/* Sends w's loop thread the stop of its resume n, for why. */
static void send_stop(ob_watch *w, unsigned n, int why) {
  atomic_store(&w->want, why);
  atomic_store(&w->target, n);
  union sigval v = {.sival_ptr = w};
  pthread_sigqueue(atomic_load(&w->thread), OB_WATCH_SIGNAL, v);
}

/* 1 when a stop sent for resume n of w has gone untaken for grace ms (the
 * first stop for n starts the count). */
static int overdue(ob_watch *w, unsigned n, unsigned long long t, unsigned long long grace) {
  if (!w->stopping || w->stop_n != n) {
    w->stopping = 1;
    w->stop_n = n;
    w->stop_ms = t;
    return 0;
  }
  return t - w->stop_ms >= grace;
}

/* A stop has not taken (ob_watch_exit_stuck): says so and ends the process.
 * The loop thread is in C, or in Lua with hooks off, and touches nothing of
 * this; what it was writing (the journal's lines buffered, not yet flushed)
 * is lost as a kill would lose it. */
static void stuck(ob_watch *w, int why, int sig, unsigned long long t) {
  const char *id = atomic_load_explicit(&w->id, memory_order_relaxed);
  const char *tool = atomic_load_explicit(&w->tool, memory_order_relaxed);
  char what[600], msg[1400];
  if (id)
    snprintf(what, sizeof what, "call %.200s (%.200s)", id, tool ? tool : "?");
  else
    snprintf(what, sizeof what, "a tool's Lua code (a libuv callback, a planner or an approver)");
  const char *where = "it is inside C code, or in a finaliser or an error handler, where Lua "
                      "cannot stop it";
  int code;
  if (why == OB_STOP_SIGNAL) {
    snprintf(msg, sizeof msg, "interrupted by %s; %s did not stop within %llu ms (%s): "
             "exiting at once; the journal is as a kill leaves it",
             sig == SIGINT ? "SIGINT" : "SIGTERM", what, t - w->stop_ms, where);
    code = 128 + sig;
  } else {
    snprintf(msg, sizeof msg, "%s %s and did not stop %llu ms after it was told to (%s): "
             "exiting at once (exit %d); the journal is as a kill leaves it, and `obelus resume` "
             "runs the call again", what,
             why == OB_STOP_TIMEOUT ? "passed its _timeout" : "ran past --max-slice without yielding",
             t - w->stop_ms, where, OB_EXIT_STUCK);
    code = OB_EXIT_STUCK;
  }
  stuck_say(stuck_ud, msg);
  ob_watch_children_kill();
  _exit(code);
}

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  while (!stopping) {
    unsigned long long p = period_ms();
    pthread_mutex_unlock(&lock);
    if (!p) { /* nothing limited: sleep until a run arms its watch or a signal comes */
      while (sem_wait(&wake) != 0 && errno == EINTR)
        ;
    } else {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += (time_t)(p / 1000);
      until.tv_nsec += (long)(p % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
      }
      while (sem_timedwait(&wake, &until) != 0 && errno == EINTR)
        ;
    }
    while (sem_trywait(&wake) == 0) /* one look serves every wake-up so far */
      ;
    pthread_mutex_lock(&lock);
    unsigned long long t = now_ms();
    int sig = atomic_load(&ob_watch_interrupted);
    for (ob_watch *w = watches; w; w = w->next) {
      if (!w->active)
        continue;
      lua_State *co = atomic_load_explicit(&w->co, memory_order_acquire);
      unsigned n = atomic_load_explicit(&w->resumes, memory_order_relaxed);
      unsigned lim = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
      unsigned long long due = atomic_load_explicit(&w->deadline_ms, memory_order_relaxed);
      if (!co) { /* idle */
        w->seen = n;
        w->seen_ms = t;
        continue;
      }
      if (sig) { /* a SIGINT or SIGTERM the loop has not taken: stop what runs */
        send_stop(w, n, OB_STOP_SIGNAL);
        if (overdue(w, n, t, OB_WATCH_STUCK_MS) && exit_at && stuck_say)
          stuck(w, OB_STOP_SIGNAL, sig, t);
        continue;
      }
      if (n != w->seen) { /* another resume than last time */
        w->seen = n;
        w->seen_ms = t;
      }
      /* overdue: signalled at every sample until the resume ends (a hook
       * that went missing is set again); one that does not take, past its
       * grace, ends the process where the CLI said so */
      if (due && t >= due) {
        send_stop(w, n, OB_STOP_TIMEOUT);
        if (overdue(w, n, t, OB_WATCH_STUCK_MS) && stuck_say)
          stuck(w, OB_STOP_TIMEOUT, 0, t);
      } else if (lim && t - w->seen_ms >= lim) {
        send_stop(w, n, OB_STOP_SLICE);
        if (overdue(w, n, t, lim > OB_WATCH_STUCK_MS ? lim : OB_WATCH_STUCK_MS) && stuck_say)
          stuck(w, OB_STOP_SLICE, 0, t);
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* Installs the handler: 1, or -1 when the signal has someone else's. An
 * ignored signal is no one's: a process that hosted an engine before (a Lua
 * module in busted, say) parks it ignored, and the ignoring outlives exec, so
 * every obelus it starts finds it so. */
static int install(void) {
  struct sigaction old;
  if (sigaction(OB_WATCH_SIGNAL, NULL, &old) != 0)
    return -1;
  if ((old.sa_flags & SA_SIGINFO) || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
    return -1; /* someone else's signal: leave it alone */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  return sigaction(OB_WATCH_SIGNAL, &sa, NULL) == 0 ? 1 : -1;
}

/* Starts the thread (under life). */
static int start_thread(void) {
  /* the thread takes no signal: OB_WATCH_SIGNAL goes to loop threads by id,
   * SIGINT and SIGTERM to a loop thread (whose handler wakes this one) */
  sigset_t block, prev;
  sigfillset(&block);
  pthread_sigmask(SIG_SETMASK, &block, &prev);
  if (!wake_made && sem_init(&wake, 0, 0) == 0)
    wake_made = 1;
  stopping = 0;
  int ok = wake_made && pthread_create(&thread, NULL, watchdog, NULL) == 0;
  pthread_sigmask(SIG_SETMASK, &prev, NULL);
  return ok;
}

ob_watch *ob_watch_new(lua_Hook hook) {
  pthread_mutex_lock(&life);
  if (installed == 0 || installed == 2)
    installed = install();
  if (installed < 0 || (!running && !(running = start_thread()))) {
    pthread_mutex_unlock(&life);
    return NULL;
  }
  pthread_mutex_lock(&lock);
  ob_watch *w = watches;
  while (w && w->active)
    w = w->next;
  if (!w && (w = calloc(1, sizeof *w))) {
    w->next = watches;
    watches = w;
  }
  if (w) {
    atomic_store(&w->co, NULL);
    atomic_store(&w->limit_ms, 0);
    atomic_store(&w->deadline_ms, 0);
    atomic_store(&w->stop, OB_STOP_NONE);
    w->hook = hook;
    w->active = 1;
    nactive++;
  }
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&life);
  return w;
}

void ob_watch_arm(ob_watch *w, unsigned limit_ms) {
  pthread_mutex_lock(&lock);
  unsigned was = atomic_exchange(&w->limit_ms, limit_ms);
  pthread_mutex_unlock(&lock);
  /* the period may be shorter now; the same limit again (each run of an engine arms
     its watch: a worker's thousands of jobs a second) leaves the watchdog asleep, where
     waking it cost a futex wake and a switch of threads each time */
  if (was != limit_ms)
    sem_post(&wake);
}

void ob_watch_free(ob_watch *w) {
  if (!w)
    return;
  pthread_mutex_lock(&life);
  pthread_mutex_lock(&lock);
  atomic_store(&w->co, NULL);
  w->active = 0;
  int last = --nactive == 0;
  if (last)
    stopping = 1;
  pthread_mutex_unlock(&lock);
  sem_post(&wake);
  if (last) {
    /* no engine has a watch: the thread ends, so no signal can come any more;
     * the watches go, and the handler is parked (ignored rather than the
     * default, which would end the process) so that this code may be
     * unloaded (the Lua module is, at lua_close) */
    pthread_join(thread, NULL);
    running = 0;
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(OB_WATCH_SIGNAL, &ign, NULL) == 0)
      installed = 2;
    while (watches) {
      ob_watch *next = watches->next;
      free(watches);
      watches = next;
    }
  }
  pthread_mutex_unlock(&life);
}

/* --- SIGINT and SIGTERM --------------------------------------------------- */

static struct sigaction before[2]; /* libuv's handlers of SIGINT and SIGTERM */
static atomic_int interrupts;

/* The sender of the last signal, and when (ms, CLOCK_MONOTONIC). */
static atomic_int last_sig, last_pid;
static _Atomic long long last_ms;

/* 1 when this signal repeats the last one's request: the same signal sent by
 * the same process (kill, not the terminal) within a second. A supervisor
 * that signals its child and then the child's process group (timeout(1)
 * does, and so do some service managers) delivers one request twice, and the
 * second must not be taken for the user's "now, at once". A Ctrl-C is sent
 * by the kernel: each one counts. */
static int same_request(int sig, const siginfo_t *si) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
  long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int sent = si && si->si_code <= 0 && si->si_pid > 0; /* SI_USER, SI_QUEUE, SI_TKILL */
  int pid = sent ? (int)si->si_pid : 0;
  int same = sent && atomic_load(&last_sig) == sig && atomic_load(&last_pid) == pid &&
             now - atomic_load(&last_ms) < 1000;
  atomic_store(&last_sig, sig);
  atomic_store(&last_pid, pid);
  atomic_store(&last_ms, now);
  return same;
}

static void on_interrupt(int sig, siginfo_t *si, void *uc) {
  int saved = errno;
  if (same_request(sig, si)) {
    errno = saved;
    return;
  }
  int n = atomic_fetch_add(&interrupts, 1) + 1;
  if (exit_at && n >= exit_at) { /* at once: the journal is as a kill leaves it */
    ob_watch_children_kill();
    _exit(128 + sig);
  }
  atomic_store(&ob_watch_interrupted, sig);
  if (wake_made)
    sem_post(&wake);
  const struct sigaction *b = &before[sig == SIGTERM];
  if (b->sa_flags & SA_SIGINFO)
    b->sa_sigaction(sig, si, uc);
  else if (b->sa_handler != SIG_DFL && b->sa_handler != SIG_IGN)
    b->sa_handler(sig);
  errno = saved;
}

void ob_watch_catch_signals(int exit_after) {
  exit_at = exit_after;
  atomic_store(&interrupts, 0);
  atomic_store(&ob_watch_interrupted, 0);
  atomic_store(&last_sig, 0);
  const int sigs[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    struct sigaction sa, old;
    if (sigaction(sigs[i], NULL, &old) != 0 || (!(old.sa_flags & SA_SIGINFO) &&
                                                old.sa_handler == SIG_IGN))
      continue; /* ignored (nohup): left so */
    if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_interrupt)
      continue; /* ours already */
    before[i] = old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_interrupt;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
}

void ob_watch_exit_stuck(ob_watch_say_fn say, void *ud) {
  pthread_mutex_lock(&lock);
  stuck_say = say;
  stuck_ud = ud;
  pthread_mutex_unlock(&lock);
}

void ob_watch_interrupt_done(void) { atomic_store(&ob_watch_interrupted, 0); }

/* --- children ---------------------------------------------------------------
 * Chunks of slots, only ever added to (a handler may walk them at any time);
 * a slot is 0 when free. */
#define CHUNK_SLOTS 1024
typedef struct chunk {
  _Atomic(pid_t) pid[CHUNK_SLOTS];
  struct chunk *next;
} chunk;
static _Atomic(chunk *) chunks;

_Atomic(pid_t) *ob_watch_child_add(pid_t pgid) {
  if (pgid <= 0)
    return NULL;
  for (;;) {
    chunk *head = atomic_load(&chunks);
    for (chunk *k = head; k; k = k->next)
      for (int i = 0; i < CHUNK_SLOTS; i++) {
        pid_t zero = 0;
        if (!atomic_load_explicit(&k->pid[i], memory_order_relaxed) &&
            atomic_compare_exchange_strong(&k->pid[i], &zero, pgid))
          return &k->pid[i];
      }
    chunk *k = calloc(1, sizeof *k);
    if (!k)
      return NULL;
    k->next = head;
    if (!atomic_compare_exchange_strong(&chunks, &head, k))
      free(k); /* another thread added one: look again */
  }
}

void ob_watch_child_remove(_Atomic(pid_t) *slot) {
  if (slot)
    atomic_store(slot, 0);
}

void ob_watch_children_kill(void) {
  for (chunk *k = atomic_load(&chunks); k; k = k->next)
    for (int i = 0; i < CHUNK_SLOTS; i++) {
      pid_t p = atomic_load(&k->pid[i]);
      if (p > 0)
        kill(-p, SIGKILL);
    }
}
