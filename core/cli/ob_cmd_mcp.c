/* ob_cmd_mcp.c -- `obelus mcp --tools PATH...`: the MCP server (ob_mcp.c) on standard
 * input and output, the stdio transport: one JSON-RPC message a line each way, read
 * and answered on the engine's loop (so the runs of many requests go on together).
 * Standard error is for logs. At the end of input, the requests still running get
 * --drain-timeout ms (default 5000) to be answered; SIGINT or SIGTERM ends at once
 * (a tool running without yielding is stopped for the loop to take it, and a
 * second signal exits at once: ob_watch.h).
 * --max-line BYTES bounds a message (default 16 MB, OB_MCP_MAX_LINE): a longer line is
 * answered with -32600 and dropped, and the server goes on. The option is this
 * command's own: taken out of argv before the shared options are parsed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ob_cli.h"
#include "host/ob_mcp.h"
#include "cli/ob_runner.h"
#include "bridge/ob_watch.h"

static const char mcp_help[] =
    "usage: obelus mcp --tools PATH... [--latent FILE] [--drain-timeout MS]\n"
    "                  [--http-max-bytes N] [--http-allow-private] [--max-line BYTES]\n"
    "                  [--max-slice MS]\n"
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
    "example (an MCP client's configuration):\n"
    "  {\"command\": \"obelus\", \"args\": [\"mcp\", \"--tools\", \"/path/to/tools\"]}\n";

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

/* --max-line BYTES taken out of argv (kept in place otherwise); 0 when absent, -1 on a
 * bad value (reported). */
static long long take_max_line(int *argc, char **argv) {
  long long max = 0;
  int n = 0;
  for (int i = 0; i < *argc; i++) {
    if (!strcmp(argv[i], "--max-line") && i + 1 < *argc) {
      size_t v;
      if (!ob_cli_parse_count(argv[i + 1], &v) || v < 2 || v > ((size_t)1 << 40)) {
        ob_cli_usage_error("mcp", "--max-line needs bytes, from 2 to 1099511627776");
        return -1;
      }
      max = (long long)v;
      i++;
    } else {
      argv[n++] = argv[i];
    }
  }
  *argc = n;
  argv[n] = NULL;
  return max;
}

int ob_cmd_mcp(int argc, char **argv) {
  long long max_line = take_max_line(&argc, argv);
  if (max_line < 0)
    return OB_EXIT_USAGE;
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, mcp_help);
  ob_unref(o.inputs);
  if (rc)
    return rc < 0 ? OB_EXIT_OK : rc;
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
