/* ob_sleep.c -- obelus.sleep: the engine's queue and heap of sleepers.
 *
 * One timer serves the whole engine: the calls asleep are kept by (due, seq)
 * and the timer is set for the earliest. A sleep due no earlier than the last
 * one queued (the common case: calls that sleep alike) joins a queue kept in
 * order, O(1); any other goes to a min-heap, O(log n). When the timer fires,
 * every call whose time has come wakes; calls that fall asleep meanwhile wait
 * for the next round, so a loop of sleep(0) still yields to the loop. No timer
 * handle is made or closed per sleep. A run cancelled or freed takes its
 * calls out (O(sleepers)).
 *
 * A sleep lasts at least its ms, by the monotonic clock at microseconds: the loop's own
 * clock is whole milliseconds, read at the start of an iteration (and, where the system
 * has one fine enough, from the coarse clock), so a due time in it would wake a call up
 * to 2 ms early whenever something else woke the loop. So a sleeper's due time is in
 * microseconds, the timer is set for the milliseconds left rounded up, and a timer that
 * fires before (the loop's clock behind) is set again for what is left. Costs: a clock
 * read a sleep and a firing (the vDSO's, some 20 ns). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ob_sched.h"

static int sleeper_before(const ob_sleeper *a, const ob_sleeper *b) {
  return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_up(ob_sleeper *h, size_t i) {
  while (i > 0 && sleeper_before(&h[i], &h[(i - 1) / 2])) {
    ob_sleeper t = h[i];
    h[i] = h[(i - 1) / 2];
    h[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static void heap_down(ob_sleeper *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && sleeper_before(&h[l], &h[m]))
      m = l;
    if (r < n && sleeper_before(&h[r], &h[m]))
      m = r;
    if (m == i)
      return;
    ob_sleeper t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void sleep_fire(uv_timer_t *t);

static uint64_t now_us(void) { return uv_hrtime() / 1000; }

/* The earliest sleeper: the queue's head or the heap's top; NULL when none. */
static ob_sleeper *sleep_first(ob_engine *e) {
  ob_sleeper *q = e->queue_head < e->queue_tail ? &e->queue[e->queue_head] : NULL;
  ob_sleeper *h = e->nsleepers ? &e->sleepers[0] : NULL;
  return !q ? h : !h ? q : sleeper_before(q, h) ? q : h;
}

/* Takes out s, the earliest sleeper (sleep_first's answer). */
static ob_crun *sleep_pop(ob_engine *e, ob_sleeper *s) {
  ob_crun *c = s->call;
  if (s != e->sleepers) {
    e->queue_head++;
  } else {
    e->sleepers[0] = e->sleepers[--e->nsleepers];
    heap_down(e->sleepers, e->nsleepers, 0);
  }
  return c;
}

static void sleep_arm(ob_engine *e) {
  ob_sleeper *s = sleep_first(e);
  if (!s) {
    uv_timer_stop(e->sleep_timer);
    return;
  }
  uint64_t now = now_us(), due = s->due;
  uv_timer_start(e->sleep_timer, sleep_fire, due > now ? (due - now + 999) / 1000 : 0, 0);
}

/* Wakes every call whose time has come; calls that fall asleep meanwhile
 * (even for 0 ms) wait for the next round, so a loop of sleep(0) still yields. */
static void sleep_fire(uv_timer_t *t) {
  ob_engine *e = t->data;
  uint64_t now = now_us(), limit = e->sleep_seq;
  ob_sleeper *s;
  size_t woken = 0;
  while ((s = sleep_first(e)) && s->due <= now && s->seq < limit) {
    if (++woken % OB_GC_BURST_CALLS == 0)
      ob_gc_burst_check(e); /* many waking while many wait: collect when idle (ob_gc.c) */
    uint64_t serial = s->serial;
    ob_crun *c = sleep_pop(e, s);
    if (e->queue_head + 2 < e->queue_tail) { /* the next ones' coroutines, ahead of time */
      __builtin_prefetch(e->queue[e->queue_head + 2].call);
      __builtin_prefetch(((const ob_crun *)e->queue[e->queue_head + 1].call)->co);
    }
    if (!c->asleep || c->serial != serial)
      continue; /* its attempt was abandoned (_timeout) */
    c->asleep = 0;
    ob_crun_resume(c, e->L, 0);
  }
  sleep_arm(e);
}

/* Keeps the sleepers of a[from..to) that are not run r's, in order; returns the new end. */
static size_t sleep_drop_run(ob_sleeper *a, size_t from, size_t to, const ob_run *r) {
  size_t kept = from;
  for (size_t i = from; i < to; i++) {
    ob_crun *c = a[i].call;
    if (c->run == r)
      c->asleep = 0;
    else
      a[kept++] = a[i];
  }
  return kept;
}

/* Takes the calls of run r out of the queue and the heap (the run is cancelled or freed). */
void ob_sleep_forget(ob_run *r) {
  ob_engine *e = r->e;
  size_t queued = sleep_drop_run(e->queue, e->queue_head, e->queue_tail, r); /* stays in order */
  size_t kept = sleep_drop_run(e->sleepers, 0, e->nsleepers, r);
  int changed = queued != e->queue_tail || kept != e->nsleepers;
  e->queue_tail = queued;
  if (kept != e->nsleepers) {
    e->nsleepers = kept;
    for (size_t i = kept / 2; i-- > 0;)
      heap_down(e->sleepers, kept, i);
  }
  if (changed && e->sleep_timer)
    sleep_arm(e);
}

/* Room for one more in the array *a of capacity *cap holding n; 0 when out of memory. */
static int sleep_room(ob_sleeper **a, size_t *cap, size_t n) {
  if (n < *cap)
    return 1;
  size_t c = *cap ? 2 * *cap : 64;
  ob_sleeper *b = realloc(*a, c * sizeof *b);
  if (!b)
    return 0;
  *a = b;
  *cap = c;
  return 1;
}

int ob_sleep_lua(lua_State *L) {
  lua_Number ms = luaL_checknumber(L, 1);
  ob_crun *c = ob_crun_of(L);
  if (!c)
    return luaL_error(L, "obelus.sleep must be called from a tool's own coroutine (its run "
                         "function), not from outside a tool or from a coroutine the tool made");
  if (!(ms >= 0) || ms > 1e15)
    return luaL_error(L, "obelus.sleep: milliseconds must be 0 or more");
  ob_engine *e = c->run->e;
  if (!e->sleep_timer) {
    if (!(e->sleep_timer = malloc(sizeof *e->sleep_timer)))
      return luaL_error(L, "obelus.sleep: out of memory");
    uv_timer_init(e->loop, e->sleep_timer);
    e->sleep_timer->data = e;
  }
  /* from now rounded up to the microsecond (ms below 1e15: in microseconds, far from the
     top of 64 bits) */
  uint64_t from = (uv_hrtime() + 999) / 1000;
  ob_sleeper s = {from + (uint64_t)(ms * 1000.0), e->sleep_seq, c, c->serial};
  if (e->queue_head == e->queue_tail)
    e->queue_head = e->queue_tail = 0; /* empty: start again from the front */
  if (e->queue_head == e->queue_tail || s.due >= e->queue[e->queue_tail - 1].due) {
    if (e->queue_head > 0 && e->queue_tail == e->capqueue) { /* slide to the front */
      memmove(e->queue, e->queue + e->queue_head,
              (e->queue_tail - e->queue_head) * sizeof *e->queue);
      e->queue_tail -= e->queue_head;
      e->queue_head = 0;
    }
    if (!sleep_room(&e->queue, &e->capqueue, e->queue_tail))
      return luaL_error(L, "obelus.sleep: out of memory");
    e->queue[e->queue_tail++] = s;
  } else {
    if (!sleep_room(&e->sleepers, &e->capsleepers, e->nsleepers))
      return luaL_error(L, "obelus.sleep: out of memory");
    e->sleepers[e->nsleepers] = s;
    heap_up(e->sleepers, e->nsleepers++);
  }
  e->sleep_seq++;
  c->asleep = 1;
  if (sleep_first(e)->call == c) /* the earliest now: the timer moves */
    sleep_arm(e);
  lua_pushlightuserdata(L, (void *)&ob_run_yield_token);
  return lua_yield(L, 1);
}
