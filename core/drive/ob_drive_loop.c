/* ob_drive_loop.c -- an engine's runs as a host that embeds obelus drives them
 * (ob_drive.h: ob_drive): work deferred out of the scheduler's stack, and stalls.
 *
 * Design
 * ------
 * The scheduler reports events and the end of a run synchronously, from deep inside
 * itself; a host that frees a run, cancels it or calls into its own language there
 * would pull the scheduler's memory from under it. The C API queues what it has to
 * deliver and the Lua module what it has to free or cancel; both then ask for their
 * work to be done on the next turn of the loop (ob_drive_defer), where nothing of
 * obelus is on the stack. That turn comes from a uv_idle rather than a check or a
 * prepare handle, because an active idle makes the loop poll without blocking: work
 * deferred before the loop runs (a run that completed inside obelus_run_start) is done
 * on its first turn, whatever the run mode. The idle is stopped before the host's
 * flush, so that it keeps the loop alive only while there is work.
 *
 * A stall: the loop has nothing left to do (no timer, no handle, no request), yet
 * calls still wait for something to wake them (a C tool that will never complete, a
 * Lua tool waiting on a handle it closed). Left alone, a run would wait forever (a
 * host's uv_run returns, and the run never ends). With check_stalls, a uv_check at the
 * end of every turn of the loop fails them (ob_run_fail_stalled: "stalled"), one run
 * at a time, until the loop has work again; obelus_run_wait and run:wait ask the same
 * when the loop returns. A host whose callbacks are on the stack (busy) is never
 * flushed or checked: the scheduler is below it.
 *
 * The handles live outside the driver: a host may free the engine while libuv still
 * holds them (closing). They are freed by their last close callback; a host that closed
 * every handle of its loop itself (uv_walk at its exit) keeps them.
 *
 * Costs: two handles per engine; the check runs once per turn of the loop and costs a
 * uv_loop_alive when nothing stalls; ob_drive_find walks the engine's runs (a handful
 * in any real host). */
#include <stddef.h>
#include <stdlib.h>

#include "drive/ob_drive.h"
#include "drive/ob_drive_int.h"

typedef struct handles {
  uv_idle_t idle;   /* the next turn: the host's deferred work */
  uv_check_t check; /* the end of each turn: stalls */
  ob_drive *dv;     /* NULL once the driver is freed */
  int open;         /* handles not closed yet: freed at 0 */
} handles;

struct ob_drive {
  ob_engine *e;
  ob_drive_host host;
  handles *h;
  ob_drun *runs;
};

#define HANDLES_OF(ptr, member) ((handles *)((char *)(ptr)-offsetof(handles, member)))

static int busy(const ob_drive *dv) { return dv->host.busy && dv->host.busy(dv->host.ud); }

static void idle_tick(uv_idle_t *t) {
  ob_drive *dv = HANDLES_OF(t, idle)->dv;
  if (!dv) {
    uv_idle_stop(t);
    return;
  }
  if (busy(dv)) /* a callback of the host turns the loop itself: next time */
    return;
  uv_idle_stop(t);
  dv->host.flush(dv->host.ud);
}

static void check_tick(uv_check_t *t) {
  ob_drive *dv = HANDLES_OF(t, check)->dv;
  if (dv)
    ob_drive_fail_stalled(dv);
}

ob_drive *ob_drive_new(ob_engine *e, const ob_drive_host *host, int check_stalls) {
  ob_drive *dv = calloc(1, sizeof *dv);
  handles *h = calloc(1, sizeof *h);
  if (!dv || !h)
    abort();
  dv->e = e;
  dv->host = *host;
  dv->h = h;
  h->dv = dv;
  h->open = 2;
  uv_idle_init(e->loop, &h->idle);
  uv_check_init(e->loop, &h->check);
  uv_unref((uv_handle_t *)&h->check);
  if (check_stalls)
    uv_check_start(&h->check, check_tick);
  return dv;
}

static void handle_closed(uv_handle_t *t) {
  handles *h = t->type == UV_IDLE ? HANDLES_OF(t, idle) : HANDLES_OF(t, check);
  if (--h->open == 0)
    free(h);
}

/* A handle a host's uv_walk closed already is libuv's until the host's close callback
 * has run, which we cannot know: the handles are left to it (a few dozen bytes, once). */
static void close_handle(uv_handle_t *t) {
  if (!uv_is_closing(t))
    uv_close(t, handle_closed);
}

void ob_drive_free(ob_drive *dv) {
  if (!dv)
    return;
  while (dv->runs)
    ob_drun_detach(dv->runs);
  handles *h = dv->h;
  h->dv = NULL;
  close_handle((uv_handle_t *)&h->idle);
  close_handle((uv_handle_t *)&h->check);
  free(dv);
}

void ob_drive_defer(ob_drive *dv) {
  if (!uv_is_active((uv_handle_t *)&dv->h->idle) && !uv_is_closing((uv_handle_t *)&dv->h->idle))
    uv_idle_start(&dv->h->idle, idle_tick);
}

void ob_drive_flush(ob_drive *dv) {
  if (busy(dv))
    return;
  if (!uv_is_closing((uv_handle_t *)&dv->h->idle))
    uv_idle_stop(&dv->h->idle);
  dv->host.flush(dv->host.ud);
}

void ob_drun_attach(ob_drun *d, ob_drive *dv, void *host) {
  ob_drun_detach(d);
  d->dv = dv;
  d->host = host;
  d->next = dv->runs;
  if (dv->runs)
    dv->runs->prevp = &d->next;
  d->prevp = &dv->runs;
  dv->runs = d;
}

void ob_drun_detach(ob_drun *d) {
  if (!d->dv)
    return;
  *d->prevp = d->next;
  if (d->next)
    d->next->prevp = d->prevp;
  d->dv = NULL;
  d->next = NULL;
  d->prevp = NULL;
}

void *ob_drive_find(const ob_drive *dv, const ob_run *r) {
  for (const ob_drun *d = dv->runs; d; d = d->next)
    if (d->run == r)
      return d->host;
  return NULL;
}

ob_drun *ob_drive_runs(const ob_drive *dv) { return dv->runs; }
ob_drun *ob_drun_next(const ob_drun *d) { return d->next; }
void *ob_drun_host(const ob_drun *d) { return d->host; }

size_t ob_drun_fail_stalled(ob_drun *d) {
  return d->run && !d->cancelled ? ob_run_fail_stalled(d->run) : 0;
}

size_t ob_drive_fail_stalled(ob_drive *dv) {
  size_t failed = 0;
  /* failures call back into the host, which may change the list: start over each time */
  while (!busy(dv) && !uv_loop_alive(dv->e->loop)) {
    ob_drun *d = dv->runs;
    while (d && !(d->run && !d->cancelled && ob_run_running(d->run)))
      d = d->next;
    size_t n = d ? ob_drun_fail_stalled(d) : 0;
    if (!n)
      break;
    failed += n;
  }
  return failed;
}
