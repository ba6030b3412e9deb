/* ob_cmd_ui.c -- `obelus ui`: serves runs and their journals over HTTP (host/ob_ui.c) until
 * SIGINT or SIGTERM. It says where on stderr, one line, then nothing more. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cli/ob_cli.h"
#include "bridge/ob_watch.h"
#include "cli/ob_runner.h"
#include "host/ob_ui.h"

static const char ui_help[] =
    "usage: obelus ui [--journals DIR]... [--tools PATH]... [--redis URL]\n"
    "                 [--queue NAME] [--bind ADDR] [--port N] [--token T]\n"
    "                 [run options]\n"
    "\n"
    "A live window on runs in the browser: a web app and its JSON API over HTTP,\n"
    "until SIGINT or SIGTERM (exit 0). The first line on stderr says where:\n"
    "`obelus ui: http://127.0.0.1:7890/`. Runs are the journals (run --journal)\n"
    "under each --journals DIR (any depth; *.jsonl files, no symbolic link\n"
    "followed), the runs started from the page, and with --redis the fleet's jobs.\n"
    "  GET  /api/runs               every run, newest first: id, source, state,\n"
    "                               started, ended, calls, failed\n"
    "  GET  /api/runs/ID            one run: each call's state, attempts, times,\n"
    "                               params (as written, as read), output, error\n"
    "  GET  /api/runs/ID/state?at=N the documents as of message N (log --at N)\n"
    "  GET  /api/runs/ID/graph.svg  its graph, laid out by Graphviz\n"
    "  GET  /api/runs/ID/events     Server-Sent Events: snapshot, records,\n"
    "                               waiting, end\n"
    "  POST /api/runs               {\"plan\", \"input\", \"name\", \"approve\"}\n"
    "  POST /api/runs/ID/approve    {\"call\", \"decision\": \"yes\"|\"no\", \"params\"}\n"
    "  POST /api/runs/ID/cancel, .../resume, .../fork ({\"from\"} or {\"at\"}, \"set\")\n"
    "  GET  /api/fleet              workers, queue, rates, poison jobs (--redis)\n"
    "\n"
    "options:\n"
    "  --journals DIR   a folder of journals (repeatable; default: the current\n"
    "                   one); runs started here go in the first one's ui/\n"
    "  --tools PATH     the tools of the runs started here (without: none can be)\n"
    "  --redis URL      a fleet's Redis (redis://HOST:PORT); --queue NAME its queue\n"
    "  --bind ADDR      the address to listen on (default 127.0.0.1); any other\n"
    "                   than loopback needs a token (one is made if not given)\n"
    "  --port N         the port (default 7890; 0: one the system picks)\n"
    "  --token T        every request must carry it: Authorization: Bearer T, or\n"
    "                   ?token=T once (it sets a cookie); without it, 401\n"
    "  run options      limits of the runs started here (--max-calls,\n"
    "                   --concurrency, --call-timeout, --max-output, --max-depth)\n"
    "\n"
    "example:\n"
    "  obelus run plan.json --tools tools/ --journal runs/a.jsonl\n"
    "  obelus ui --journals runs --tools tools/ &\n"
    "  curl -s http://127.0.0.1:7890/api/runs\n";

static void on_signal(uv_signal_t *s, int signum) {
  (void)signum;
  *(int *)s->data = 1;
  ob_watch_interrupt_done(); /* taken: the runs are cancelled as the server ends */
  uv_stop(s->loop);
}

/* ui's own options (ob_cmd_own_fn); the rest are the engine's (--tools, limits). */
typedef struct ui_own {
  const char *dirs[64], *bind, *token;
  size_t ndirs, port;
} ui_own;

static int take_own(void *ud, const char *a, const char *val) {
  ui_own *u = ud;
  if (!strcmp(a, "--journals")) {
    if (u->ndirs == 64)
      return ob_cli_usage_error("ui", "too many --journals");
    u->dirs[u->ndirs++] = val;
  } else if (!strcmp(a, "--bind")) {
    u->bind = val;
  } else if (!strcmp(a, "--port")) {
    if (!ob_cli_parse_count(val, &u->port) || u->port > 65535)
      return ob_cli_usage_error("ui", "--port needs a number from 0 to 65535");
  } else if (!strcmp(a, "--token")) {
    u->token = val;
  } else {
    return 0;
  }
  return 1;
}

int ob_cmd_ui(int argc, char **argv) {
  ui_own own = {.port = 7890};
  ob_cmd_options o;
  int rc = ob_cmd_options_parse_own(argc, argv, &o, ui_help, take_own, &own);
  ob_unref(o.inputs);
  if (rc)
    return rc < 0 ? OB_EXIT_OK : rc;
  const char **dirs = own.dirs, *bind = own.bind, *token = own.token;
  size_t ndirs = own.ndirs, port = own.port;
  if (!ndirs)
    dirs[ndirs++] = ".";
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  if (!e) {
    ob_eprintf("obelus ui: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  if ((rc = ob_cmd_load(&o, e)) != OB_EXIT_OK) {
    ob_engine_free(e);
    return rc;
  }
  ob_run_options limits = ob_cmd_run_limits(&o); /* as `obelus run` takes them */
  ob_ui_config cfg = {.journals = dirs, .njournals = ndirs, .bind = bind, .port = (int)port,
                      .token = token, .engine = o.ntools ? e : NULL, .redis = o.redis,
                      .queue = o.queue, .limits = &limits};
  ob_ui *u = ob_ui_new(e->loop, &cfg, &err);
  if (!u) {
    ob_eprintf("obelus ui: %s\n", err.msg);
    uv_run(e->loop, UV_RUN_DEFAULT);
    ob_engine_free(e);
    return OB_EXIT_USAGE;
  }
  const char *host = bind ? bind : "127.0.0.1";
  int v6 = strchr(host, ':') != NULL;
  const char *made = ob_ui_token(u);
  ob_eprintf("obelus ui: http://%s%s%s:%d/%s%s\n", v6 ? "[" : "", host, v6 ? "]" : "",
             ob_ui_port(u), made ? "?token=" : "", made ? made : "");
  if (made)
    ob_eprintf("obelus ui: --bind %s is not loopback: every request needs the token %s "
               "(made now; give --token T to choose it)\n", host, made);
  fflush(stderr);
  int stopped = 0;
  uv_signal_t sig[2]; /* a tool a stop cannot reach ends the server */
  ob_cli_signals(e->loop, sig, on_signal, &stopped, 0, 2, "obelus ui");
  while (!stopped)
    uv_run(e->loop, UV_RUN_DEFAULT);
  ob_cli_signals_close(sig);
  ob_ui_close(u);
  uv_run(e->loop, UV_RUN_DEFAULT); /* the server's handles close */
  ob_ui_free(u);
  ob_engine_free(e);
  return OB_EXIT_OK;
}
