/* ob_mcp_http.h -- the MCP server (ob_mcp.h) over the Streamable HTTP transport
 * (protocol revisions 2025-03-26 and 2025-06-18), on the engine's loop
 * (ob_mcp_http.c; `obelus mcp --http`).
 *
 * One endpoint, /mcp. POST carries one JSON-RPC message or a batch: requests are
 * answered as application/json, or as a Server-Sent Events stream (progress
 * notifications, then the answer) when a request of the body asks for progress
 * (_meta.progressToken) or the client accepts event streams only; a body of
 * notifications or responses alone gets 202 and no body. `initialize` makes a session
 * (its id, 128 random bits, in the answer's Mcp-Session-Id header), with an ob_mcp of
 * its own; every later request names it (none: 400; one not known, or ended: 404);
 * DELETE /mcp ends it, cancelling its calls. GET (a standalone stream) is not offered:
 * 405. Who may ask: ob_http_auth.h's rules (a token off loopback; Origin checked). */
#ifndef OB_MCP_HTTP_H
#define OB_MCP_HTTP_H

#include <stddef.h>

#include "base/ob_error.h"
#include "engine/ob_engine.h"

typedef struct ob_mcp_http ob_mcp_http;

typedef struct ob_mcp_http_config {
  const char *bind;       /* the address to listen on: "127.0.0.1" when NULL */
  int port;               /* 0: one the kernel picks (ob_mcp_http_port) */
  const char *token;      /* every request must carry it (ob_http_auth_token); NULL: none
                             on loopback, one made (ob_mcp_http_token) on another address */
  size_t max_body;        /* a request's body in bytes at most (larger: 413); 0:
                             OB_MCP_MAX_LINE, 16 MB */
  unsigned max_slice_ms;  /* each call's run's (ob_mcp_set_max_slice); 0: the default */
  size_t max_sessions;    /* sessions at most (0: OB_MCP_HTTP_MAX_SESSIONS); past it the
                             one unused longest, with nothing running, is ended */
} ob_mcp_http_config;

#define OB_MCP_HTTP_MAX_SESSIONS 256

/* Starts serving on e's loop. NULL with err: the address taken or not this machine's, no
 * token to be had for an address other than loopback. */
ob_mcp_http *ob_mcp_http_new(ob_engine *e, const ob_mcp_http_config *cfg, ob_error *err);
int ob_mcp_http_port(const ob_mcp_http *h);
/* The token made because none was given for an address other than loopback (to be
 * said to the user), or NULL. */
const char *ob_mcp_http_token(const ob_mcp_http *h);
/* The sessions open. */
size_t ob_mcp_http_sessions(const ob_mcp_http *h);
/* Ends every session (their calls cancelled, nothing more sent) and stops serving: the
 * server's handles close as the loop runs; run it (uv_run until nothing is left), then
 * ob_mcp_http_free. */
void ob_mcp_http_close(ob_mcp_http *h);
void ob_mcp_http_free(ob_mcp_http *h);

#endif
