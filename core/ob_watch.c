/* ob_watch.c -- the watchdog thread and its signal (see ob_watch.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ob_watch.h"

/* `life` serialises making and giving back watches, which start and stop the
 * thread: it runs while some engine has a watch, so that a process whose
 * engines are all freed has no thread of ours left (valgrind, hosts). */
static pthread_mutex_t life = PTHREAD_MUTEX_INITIALIZER;
static int installed; /* 1 the handler is ours, 2 parked (ignored, by us), -1 someone else's */
static int running, nactive;  /* the thread; the watches in use (both under life) */
static pthread_t thread;
/* the thread's: the watches, and when to stop */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int stopping;
static ob_watch *watches; /* every watch ever made, active or not */

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
    atomic_store(&w->hooked, 1);
    lua_sethook(co, w->hook, LUA_MASKCOUNT, 1);
  }
}

/* The sampling period: a quarter of the shortest limit in force, 5 ms at
 * least; 0 when no resume has a limit (sleep until a watch changes). */
static unsigned long long period_ms(void) {
  unsigned long long p = 0;
  for (ob_watch *w = watches; w; w = w->next) {
    unsigned lim = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
    unsigned long long q = lim / 4 < 5 ? 5 : lim / 4;
    if (w->active && lim && (!p || q < p))
      p = q;
  }
  return p;
}

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  while (!stopping) {
    unsigned long long p = period_ms();
    if (!p) { /* nothing limited: sleep until a run arms its watch */
      pthread_cond_wait(&wake, &lock);
      continue;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(p / 1000);
    until.tv_nsec += (long)(p % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&wake, &lock, &until);
    unsigned long long t = now_ms();
    for (ob_watch *w = watches; w; w = w->next) {
      if (!w->active)
        continue;
      lua_State *co = atomic_load_explicit(&w->co, memory_order_acquire);
      unsigned n = atomic_load_explicit(&w->resumes, memory_order_relaxed);
      unsigned lim = atomic_load_explicit(&w->limit_ms, memory_order_relaxed);
      if (!co || n != w->seen) { /* idle, or another resume than last time */
        w->seen = n;
        w->seen_ms = t;
        w->signalled = 0;
        continue;
      }
      if (lim && !w->signalled && t - w->seen_ms >= lim) {
        atomic_store(&w->target, n);
        w->signalled = 1;
        union sigval v = {.sival_ptr = w};
        pthread_sigqueue(atomic_load(&w->thread), OB_WATCH_SIGNAL, v);
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* Installs the handler: 1, or -1 when the signal has someone else's. */
static int install(void) {
  struct sigaction old;
  if (sigaction(OB_WATCH_SIGNAL, NULL, &old) != 0)
    return -1;
  void (*expect)(int) = installed == 2 ? SIG_IGN : SIG_DFL;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != expect)
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
  /* the thread must not take the signal itself: it goes to loop threads by id */
  sigset_t block, prev;
  sigemptyset(&block);
  sigaddset(&block, OB_WATCH_SIGNAL);
  pthread_sigmask(SIG_BLOCK, &block, &prev);
  stopping = 0;
  int ok = pthread_create(&thread, NULL, watchdog, NULL) == 0;
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
    atomic_store(&w->hooked, 0);
    w->hook = hook;
    w->signalled = 0;
    w->active = 1;
    nactive++;
  }
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&life);
  return w;
}

void ob_watch_arm(ob_watch *w, unsigned limit_ms) {
  pthread_mutex_lock(&lock);
  atomic_store(&w->limit_ms, limit_ms);
  pthread_cond_signal(&wake); /* the period may be shorter now */
  pthread_mutex_unlock(&lock);
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
  pthread_cond_signal(&wake);
  pthread_mutex_unlock(&lock);
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
