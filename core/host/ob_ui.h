/* ob_ui.h -- `obelus ui`: runs and their journals served over HTTP on the engine's loop
 * (ob_ui.c): a JSON API first; the web app on it comes next. */
#ifndef OB_UI_H
#define OB_UI_H

#include <uv.h>

#include "base/ob_error.h"
#include "engine/ob_engine.h"
#include "engine/ob_run.h"

typedef struct ob_ui ob_ui;

typedef struct ob_ui_config {
  const char *const *journals; /* the folders whose journals (*.jsonl, at any depth) it
                                  serves; njournals of them */
  size_t njournals;
  const char *bind;   /* the address to listen on: "127.0.0.1" when NULL */
  int port;           /* 0: one the kernel picks (ob_ui_port) */
  const char *token;  /* every API request must carry it (Authorization: Bearer T, the
                         cookie obelus_token, or ?token=T, which sets that cookie); NULL:
                         none, which only a loopback address may go without */
  ob_engine *engine;  /* runs started from the UI (POST /api/runs) run here, with its
                         tools; NULL: none can be */
  const char *redis;  /* a fleet's Redis (redis://HOST:PORT): GET /api/fleet, its jobs
                         among the runs; NULL: none */
  const char *queue;  /* the fleet's queue (NULL: the default) */
  const ob_run_options *limits; /* the limits of the runs started here (concurrency,
                                   max_calls, max_output, call_timeout_ms, max_depth,
                                   max_slice_ms), or NULL: none */
} ob_ui_config;

/* Starts serving on loop. NULL with err: a folder that is not one, an address other than
 * loopback without a token, the port taken. */
ob_ui *ob_ui_new(uv_loop_t *loop, const ob_ui_config *cfg, ob_error *err);
int ob_ui_port(const ob_ui *u);
/* The token made for a non-loopback address given none (to say it), or NULL. */
const char *ob_ui_token(const ob_ui *u);
/* Stops serving: its handles close as the loop runs; run it (uv_run until nothing is
 * left), then ob_ui_free. */
void ob_ui_close(ob_ui *u);
void ob_ui_free(ob_ui *u);

#endif
