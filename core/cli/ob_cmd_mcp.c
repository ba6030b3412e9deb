/* ob_cmd_mcp.c -- `obelus mcp --tools PATH...`: the MCP server (ob_mcp.c) on standard
 * input and output, the stdio transport: one JSON-RPC message a line each way, read
 * and answered on the engine's loop (so the runs of many requests go on together).
 * Standard error is for logs. At the end of input, the requests still running get
 * --drain-timeout ms (default 5000) to be answered; SIGINT or SIGTERM ends at once
 * (a tool running without yielding is stopped for the loop to take it, and a
 * second signal exits at once: ob_watch.h).
 * --max-line BYTES bounds a message (default 16 MB, OB_MCP_MAX_LINE): a longer line is
 * answered with -32600 and dropped, and the server goes on.
 * With --http, the same server over Streamable HTTP (host/ob_mcp_http.c) on --bind
 * (127.0.0.1) and --port (7891), --token wanted of every request: this file parses the
 * options, says where on stderr (one line; and a token it made, before), and runs the
 * loop until SIGINT or SIGTERM, then ends the sessions (their calls cancelled). These
 * options are this command's own: the shared parse hands them to take_own. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ob_cli.h"
#include "host/ob_mcp.h"
#include "host/ob_mcp_http.h"
#include "cli/ob_runner.h"
#include "bridge/ob_watch.h"

static const char mcp_help[] =
    "usage: obelus mcp --tools PATH... [--latent FILE] [--drain-timeout MS]\n"
    "                  [--http-max-bytes N] [--http-allow-private] [--max-line BYTES]\n"
    "                  [--max-slice MS]\n"
    "       obelus mcp --http [--bind ADDR] [--port N] [--token T] --tools PATH...\n"
    "\n"
    "Serves the Model Context Protocol on standard input and output (JSON-RPC 2.0,\n"
    "one message a line): initialize, tools/list (every loaded tool, and run_plan,\n"
    "whose arguments are plan, a plan object, and an optional input document),\n"
    "tools/call (a tool's call, or a whole plan, run on the engine's loop; many at\n"
    "once), progress notifications when a call asks for them, cancellation. A plan\n"
    "that fails validation, or a run that fails, answers with isError: true.\n"
    "A message longer than --max-line bytes (default 16777216, 16 MB) is answered\n"
    "with a JSON-RPC error -32600 and skipped; notifications are never answered.\n"
    "A batch (a JSON array of at most 1000 messages) is taken at protocol 2025-03-26\n"
    "and answered with one array; at other versions it is one -32600 error.\n"
    "The processes a call's tools spawned are killed before its answer is sent.\n"
    "A tool that runs --max-slice ms (default 30000) without yielding is stopped:\n"
    "its call answers with isError: true, and the server goes on.\n"
    "\n"
    "With --http, the same server over Streamable HTTP (MCP 2025-03-26, 2025-06-18)\n"
    "at http://ADDR:PORT/mcp, said on stderr in one line, until SIGINT or SIGTERM\n"
    "(exit 0; calls running are cancelled). POST one message or a batch: an answer\n"
    "ready at once is application/json; a call that runs is answered on an event\n"
    "stream (progress notifications, then the answer) when the client accepts\n"
    "text/event-stream, else as JSON when done; notifications get 202. initialize\n"
    "makes a session (the Mcp-Session-Id header of its answer), which every later\n"
    "request names (none: 400; unknown or ended: 404); DELETE /mcp ends it and\n"
    "cancels its calls. GET is 405 (no standalone stream). A body larger than\n"
    "--max-line is 413. A request from a web page of another origin is 403.\n"
    "  --bind ADDR    the address to listen on (default 127.0.0.1); another than\n"
    "                 loopback needs a token: without --token one is made and said\n"
    "                 on stderr (`obelus mcp: token T`)\n"
    "  --port N       the port (default 7891; 0: one the system picks)\n"
    "  --token T      every request must carry it: Authorization: Bearer T (or the\n"
    "                 cookie obelus_token=T, or ?token=T); without it, 401\n"
    "\n"
    "examples (an MCP client's configuration; a server for HTTP clients):\n"
    "  {\"command\": \"obelus\", \"args\": [\"mcp\", \"--tools\", \"/path/to/tools\"]}\n"
    "  obelus mcp --http --tools /path/to/tools    # then http://127.0.0.1:7891/mcp\n";

typedef struct mcp_cli {
  ob_mcp *m;
  int eof, stop;
  uv_timer_t drain;
} mcp_cli;

static void send_line(void *ud, const char *json, size_t len) {
  (void)ud;
  fwrite(json, 1, len, stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(want);
  buf->len = buf->base ? want : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  mcp_cli *c = s->data;
  if (n > 0) {
    ob_mcp_feed(c->m, buf->base, (size_t)n);
  } else if (n < 0) {
    ob_mcp_feed_end(c->m);
    c->eof = 1;
    uv_read_stop(s);
  }
  free(buf->base);
}

static void on_drain(uv_timer_t *t) {
  mcp_cli *c = t->data;
  c->stop = 1;
}

static void on_signal(uv_signal_t *s, int signum) {
  mcp_cli *c = s->data;
  (void)signum;
  c->stop = 1;
  ob_watch_interrupt_done(); /* taken: the requests are cancelled as the server ends */
}

/* This command's own options, taken out of argv (kept in place otherwise). */
typedef struct mcp_own {
  long long max_line; /* 0: the default */
  int http;
  const char *bind, *token;
  size_t port;
  int port_given;
} mcp_own;

/* An option of this command's own (ob_cmd_own_fn): 1 taken, 0 not, or OB_EXIT_USAGE. */
static int take_own(void *ud, const char *a, const char *val) {
  mcp_own *own = ud;
  if (!strcmp(a, "--http")) {
    own->http = 1;
  } else if (!strcmp(a, "--max-line")) {
    size_t v;
    if (!ob_cli_parse_count(val, &v) || v < 2 || v > ((size_t)1 << 40))
      return ob_cli_usage_error("mcp", "--max-line needs bytes, from 2 to 1099511627776");
    own->max_line = (long long)v;
  } else if (!strcmp(a, "--bind")) {
    own->bind = val;
  } else if (!strcmp(a, "--token")) {
    own->token = val;
    if (!*own->token)
      return ob_cli_usage_error("mcp", "--token needs a value");
  } else if (!strcmp(a, "--port")) {
    if (!ob_cli_parse_count(val, &own->port) || own->port > 65535)
      return ob_cli_usage_error("mcp", "--port needs a number from 0 to 65535");
    own->port_given = 1;
  } else {
    return 0;
  }
  return 1;
}

/* `obelus mcp --http`: the server (ob_mcp_http.h) until SIGINT or SIGTERM. */
static int serve_http(ob_engine *e, const mcp_own *own, const ob_cmd_options *o) {
  ob_mcp_http_config cfg = {.bind = own->bind, .port = (int)own->port, .token = own->token,
                            .max_body = (size_t)own->max_line,
                            .max_slice_ms = (unsigned)o->max_slice_ms};
  ob_error err;
  ob_mcp_http *h = ob_mcp_http_new(e, &cfg, &err);
  if (!h) {
    ob_eprintf("obelus mcp: %s\n", err.msg);
    uv_run(e->loop, UV_RUN_DEFAULT); /* what the server had opened closes */
    return OB_EXIT_USAGE;
  }
  const char *host = own->bind ? own->bind : "127.0.0.1";
  int v6 = strchr(host, ':') != NULL;
  if (ob_mcp_http_token(h))
    ob_eprintf("obelus mcp: token %s (made for --bind %s: send it as Authorization: Bearer)\n",
               ob_mcp_http_token(h), host);
  ob_eprintf("obelus mcp: http://%s%s%s:%d/mcp\n", v6 ? "[" : "", host, v6 ? "]" : "",
             ob_mcp_http_port(h));
  fflush(stderr);
  mcp_cli c = {0};
  uv_signal_t sig[2]; /* a tool a stop cannot reach ends the server */
  ob_cli_signals(e->loop, sig, on_signal, &c, 0, 2, "obelus mcp");
  while (!c.stop)
    uv_run(e->loop, UV_RUN_ONCE);
  ob_cli_signals_close(sig);
  ob_mcp_http_close(h); /* the sessions end, their calls cancelled */
  uv_run(e->loop, UV_RUN_DEFAULT); /* the server's handles close */
  ob_mcp_http_free(h);
  return OB_EXIT_OK;
}

int ob_cmd_mcp(int argc, char **argv) {
  mcp_own own = {.port = 7891};
  ob_cmd_options o;
  int rc = ob_cmd_options_parse_own(argc, argv, &o, mcp_help, take_own, &own);
  ob_unref(o.inputs);
  if (rc)
    return rc < 0 ? OB_EXIT_OK : rc;
  if (!own.http && (own.bind || own.token || own.port_given))
    return ob_cli_usage_error("mcp", "--bind, --port and --token go with --http");
  long long max_line = own.max_line;
  if (!o.ntools)
    return ob_cli_usage_error("mcp", "needs --tools PATH");
  ob_error err;
  ob_engine *e = ob_engine_new(NULL, &err);
  if (!e) {
    fprintf(stderr, "obelus mcp: %s\n", err.msg);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_note(e, ob_cli_note, NULL);
  if ((rc = ob_cmd_load(&o, e)) != OB_EXIT_OK) {
    ob_engine_free(e);
    return rc;
  }
  if (own.http) {
    rc = serve_http(e, &own, &o);
    ob_engine_free(e);
    return rc;
  }
  mcp_cli c = {0};
  c.m = ob_mcp_new(e, send_line, &c);
  ob_mcp_set_max_line(c.m, (size_t)max_line);
  ob_mcp_set_max_slice(c.m, (unsigned)o.max_slice_ms); /* each call's run, as `run` does */
  uv_signal_t sig[2]; /* a tool a stop cannot reach ends the server */
  ob_cli_signals(e->loop, sig, on_signal, &c, 0, 2, "obelus mcp");
  uv_timer_init(e->loop, &c.drain);
  c.drain.data = &c;
  uv_handle_type kind = uv_guess_handle(0);
  uv_stream_t *in = NULL;
  uv_pipe_t pipe;
  uv_tty_t tty;
  if (kind == UV_NAMED_PIPE && uv_pipe_init(e->loop, &pipe, 0) == 0 && uv_pipe_open(&pipe, 0) == 0) {
    in = (uv_stream_t *)&pipe;
  } else if (kind == UV_TTY && uv_tty_init(e->loop, &tty, 0, 1) == 0) {
    in = (uv_stream_t *)&tty;
  } else { /* a file: read whole, then answer */
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
      ob_mcp_feed(c.m, chunk, n);
    ob_mcp_feed_end(c.m);
    c.eof = 1;
  }
  if (in) {
    in->data = &c;
    uv_read_start(in, on_alloc, on_read);
  }
  int draining = 0;
  while (!c.stop) {
    if (c.eof && !ob_mcp_pending(c.m))
      break;
    if (c.eof && !draining) {
      draining = 1;
      uv_timer_start(&c.drain, on_drain, o.drain_ms, 0);
    }
    uv_run(e->loop, UV_RUN_ONCE);
  }
  if (in)
    uv_close((uv_handle_t *)in, NULL);
  ob_cli_signals_close(sig);
  uv_close((uv_handle_t *)&c.drain, NULL);
  ob_mcp_free(c.m);
  uv_run(e->loop, UV_RUN_NOWAIT);
  ob_engine_free(e);
  return OB_EXIT_OK;
}
