/* ob_mcp.h -- a Model Context Protocol server over an engine (ob_mcp.c): JSON-RPC 2.0
 * messages in, one per line, answers and notifications out through a callback. The
 * transport is the caller's (`obelus mcp`: standard input and output on the engine's
 * loop, ob_cmd_mcp.c).
 *
 * It offers the engine's tools and run_plan (arguments: plan, the plan object, and an
 * optional input document) through tools/list and tools/call; every call runs as a
 * plan on the engine's loop, so requests run concurrently and are answered as they
 * finish, with progress notifications when the request asks for them
 * (_meta.progressToken) and cancellation (notifications/cancelled). A plan that fails
 * validation, or a run that fails, is a result with isError: true; malformed JSON-RPC
 * gets an error response, never a crash; notifications never get an answer. Each
 * call's run is freed (the processes its tools spawned killed with it: ob_run_free)
 * before its answer is sent. A JSON-RPC batch (a line holding an array) is taken at
 * protocol 2025-03-26, at most OB_MCP_MAX_BATCH members, and answered with one array.
 *
 * Costs: per request in progress, a plan, a run and its log; per batch in progress,
 * the answers gathered so far; the line being read, at most its bound (16 MB by
 * default). */
#ifndef OB_MCP_H
#define OB_MCP_H

#include "engine/ob_engine.h"

typedef struct ob_mcp ob_mcp;

/* Called with each message to send (one JSON text, no newline). */
typedef void (*ob_mcp_send_fn)(void *ud, const char *json, size_t len);

ob_mcp *ob_mcp_new(ob_engine *e, ob_mcp_send_fn send, void *ud);
/* One line from the client (no newline), answered through send; no stdio: the MCP
 * fuzz target drives this. */
void ob_mcp_handle(ob_mcp *m, const char *line, size_t len);
/* Bytes from the client, any split: each whole line handled as its newline comes, in
 * time linear in the bytes; a line past the bound (ob_mcp_set_max_line) is dropped and
 * answered with one -32600 (id null). ob_mcp_feed_end: the end of input (a last line
 * without its newline is handled). */
void ob_mcp_feed(ob_mcp *m, const char *data, size_t len);
void ob_mcp_feed_end(ob_mcp *m);
/* The members of a batch (a line holding a JSON array, protocol 2025-03-26): more is
 * one -32600. */
#define OB_MCP_MAX_BATCH 1000
/* A line's bound in bytes (0: the default). */
#define OB_MCP_MAX_LINE ((size_t)16 << 20)
void ob_mcp_set_max_line(ob_mcp *m, size_t max);
/* How long a tool of a call's run may go without yielding (ob_run_options.max_slice_ms;
 * 0: the default, OB_RUN_MAX_SLICE_MS). */
void ob_mcp_set_max_slice(ob_mcp *m, unsigned ms);
/* Requests still running. */
size_t ob_mcp_pending(const ob_mcp *m);
/* The protocol version initialize agreed on ("2025-06-18", ...), or NULL before. */
const char *ob_mcp_version(const ob_mcp *m);
/* Cancels what runs (nothing more is sent) and frees m. */
void ob_mcp_free(ob_mcp *m);

#endif
