/* obelus.h -- the public C API of obelus, a plan execution engine scriptable in Lua.
 * The whole API an embedding host needs, and nothing else: read it top to bottom.
 *
 * A plan is a JSON list of tool calls wired together by references
 * ("†state.profile"); obelus runs every call whose inputs are ready,
 * concurrently, on a libuv loop (the host's own or the engine's). Tools are
 * Lua files (plan-format §9) or C functions registered here.
 *
 * A complete host, on its own loop:
 *
 *   #include <stdio.h>
 *   #include <obelus.h>
 *
 *   // A tool written in C: params arrive as JSON text; complete now, or keep
 *   // `call` and complete it later from any callback on the loop.
 *   static void greet(obelus_call *call, const char *params, void *data) {
 *     (void)params, (void)data;
 *     obelus_call_complete(call, "\"hello\"");
 *   }
 *
 *   static void done(obelus_run *run, int status, const char *output, void *data) {
 *     printf("status %d, output %s\n", status, output);  // status: 0 ok, 1 some call failed
 *   }
 *
 *   int main(void) {
 *     uv_loop_t *loop = uv_default_loop();
 *     obelus_engine *e;
 *     if (obelus_engine_new(&e, loop) < 0)
 *       return 2;
 *     if (obelus_engine_load_tools(e, "tools/") < 0 ||       // a .lua file or a folder
 *         obelus_engine_add_tool(e, "greet", "{\"type\":\"object\"}", greet, NULL) < 0) {
 *       host_log("%s", obelus_engine_errmsg(e));            // the host's own logger
 *       return 2;
 *     }
 *     obelus_run_options opt = {0};
 *     opt.on_done = done;
 *     obelus_run *run;
 *     if (obelus_run_new(e, &run, "[{\"_tool\":\"greet\",\"_outputPath\":\"†state.hi\"}]",
 *                        &opt) < 0) {
 *       host_log("%s", obelus_engine_errmsg(e));  // every problem, one a line
 *       return 2;                                         // nothing ran
 *     }
 *     obelus_run_start(run);
 *     uv_run(loop, UV_RUN_DEFAULT);    // or UV_RUN_NOWAIT once per frame in a game loop
 *     obelus_run_free(run);
 *     obelus_engine_free(e);
 *     uv_run(loop, UV_RUN_NOWAIT);     // the engine's closed handles are released
 *     return 0;
 *   }
 *
 * Build: cc -std=c11 host.c $(pkg-config --cflags --libs obelus)
 * (obelus.pc's Cflags carry -D_POSIX_C_SOURCE=200809L: uv.h needs POSIX's thread
 * types, which a strict -std=c11 hides; a host that includes uv.h needs them anyway.)
 *
 * Nouns: an ENGINE (long-lived: a Lua state with the tools loaded, bound to
 * one libuv loop), a RUN (one execution of one plan on an engine), a CALL
 * (one running call of a C tool: the handle it completes), a QUEUE (jobs in
 * Redis that `obelus worker`s run). Verbs follow:
 * obelus_engine_new / obelus_engine_free, obelus_run_new / _start / _cancel /
 * _free, obelus_resume (a run taken up again from its journal),
 * obelus_call_complete, obelus_queue_new / _submit / _wait / _free.
 *
 * Rules that hold everywhere:
 *
 *  - Errors are negative OBELUS_E* codes (0 is success). The engine keeps a
 *    message for the latest call that failed, ready to print as it is
 *    (obelus_engine_errmsg): where, what, and what to do.
 *  - No global state: two engines in one process share nothing and never
 *    see each other's tools, runs or errors, on one loop or on two (the
 *    watchdog below is the one thing they share).
 *  - One thread: an engine, its runs and its calls are used from the
 *    thread that runs the engine's loop. Nothing here locks.
 *  - Runaway tools: a tool that runs too long without yielding (30 s) is
 *    stopped with an error. For that, while any engine exists, obelus runs
 *    one watchdog thread of its own and uses the real-time signal
 *    SIGRTMAX-2, sent only to the thread that runs an overdue tool. If that
 *    signal already has a handler when the first engine is made, obelus
 *    leaves it alone and falls back to a count hook on each call's
 *    coroutine (which slows Lua code down about 2x). When the last engine
 *    is freed the thread ends and the signal is left ignored.
 *  - JSON crosses the API as text: `const char *` in (UTF-8, NUL-terminated),
 *    and strings malloc'ed for you out (release them with free()). Text is
 *    the one format every C host can produce and check, and it keeps the
 *    engine's value representation out of the ABI; the price is one print
 *    and one parse per C tool call, small beside any real tool's work.
 *  - Callbacks (events and completion) are called FROM THE LOOP, never from
 *    inside an obelus function: inside one you may call anything here,
 *    including obelus_run_cancel and obelus_run_free on that very run, but
 *    obelus_engine_free and obelus_run_wait (the loop is running). The one
 *    exception is a C tool's function, called by the scheduler itself as
 *    the call starts (see "Tools written in C").
 */
#ifndef OBELUS_H
#define OBELUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with every symbol hidden but the functions declared here:
 * a host sees this API and nothing of the engine's inside. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ==== Errors ====================================================================== */

/* Every function that can fail returns one of these (negative), or OBELUS_OK.
 * The values are the engine's own error codes, the same everywhere in obelus. */
#define OBELUS_OK 0
#define OBELUS_ENOMEM (-1)    /* out of memory */
#define OBELUS_EINVAL (-2)    /* invalid argument, or an invalid plan (see its problems) */
#define OBELUS_ESYNTAX (-3)   /* malformed reference expression (the message gives the
                                 0-based character position) */
#define OBELUS_EJSON (-4)     /* JSON text that does not parse (the message gives line
                                 and column) */
#define OBELUS_EWRITE (-5)    /* an output method cannot apply at a path (plan-format §4) */
#define OBELUS_EDEPTH (-6)    /* a value nested deeper than 4,096 levels */
#define OBELUS_EIO (-7)       /* a file could not be read or written */
#define OBELUS_ETYPE (-8)     /* a JSON value of the wrong type */
#define OBELUS_ENOENT (-9)    /* absent: nothing at that reference */
#define OBELUS_EBUSY (-10)    /* not possible now: the run has not finished, or the
                                 call came from inside a callback that forbids it */
#define OBELUS_ECANCELED (-11) /* the run was cancelled before it finished */

/* A short, static name for a code: "malformed JSON", "absent", ...
 * ("unknown error" for a code that is not one of the above). */
const char *obelus_strerror(int code);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *obelus_version(void);

/* ==== The engine ==================================================================== */

typedef struct obelus_engine obelus_engine;

/* Makes an engine on `loop`: the host's own loop, which the host runs
 * (uv_run, any mode) and closes; or NULL, for a loop the engine makes and
 * owns (obelus_engine_loop gives it; obelus_run_wait runs it). Several
 * engines may share one loop. Returns OBELUS_OK with *out set, or a negative
 * code with *out NULL: OBELUS_ENOMEM (Lua could not start), OBELUS_EINVAL (no
 * loop could be made, or the engine's Lua runtime failed to load). */
int obelus_engine_new(obelus_engine **out, uv_loop_t *loop);

/* Frees the engine: every run still alive is cancelled and freed with it
 * (and with them every event not yet delivered), and every C tool call not
 * completed yet is detached (completing it later only releases it). Handles
 * Lua tools left open (obelus.uv timers, sockets, ...) are closed too. On an
 * engine-owned loop all of it happens at once and the loop is closed. On the
 * host's loop the engine's handles are closed and their memory is released
 * the next time the loop runs: run it once (uv_run(loop, UV_RUN_NOWAIT))
 * before uv_loop_close, and free engines before closing every handle of the
 * loop with uv_walk. When tools left libuv work behind, the engine's Lua
 * state stays until libuv has called back for all of it (luv calls into
 * it), and goes then: the next turn, as above, for the handles closed here;
 * a turn more for a handle a tool had closed itself; and for a request in
 * flight (a file read, a DNS lookup), once it completes. Run the loop until
 * uv_run returns 0 when unsure. Call it outside every
 * callback of this engine (a C tool function, an event, a completion) and
 * outside obelus_run_wait: it aborts the process with a message otherwise,
 * as freeing the code that is running would. NULL is allowed. */
void obelus_engine_free(obelus_engine *e);

/* The most memory (in MB) the engine may hold: its Lua state, its runs'
 * values and message logs, in one account (`obelus run --max-memory`). The
 * call whose work would pass it fails ("memory limit of N MB reached
 * (--max-memory)"): a Lua allocation while a tool runs (in its call or its
 * libuv callbacks), a result, a write, an async uv.fs_read or a cjson.encode
 * with no room; the run goes on. 0: the default, half the process's
 * address-space or data limit (ulimit -v, -d) when it has one, else none. */
void obelus_engine_set_max_memory(obelus_engine *e, size_t mb);

/* What the engine says about itself outside any run's events, for people: an
 * error in a tool's libuv callback ("callback_error"), in an obelus.http
 * callback ("http"), in closing an abandoned call's handles ("abandon") or
 * killing the tools' children ("children"). kind names it, call_id is the call
 * or NULL, msg the text (one or more lines, no final newline). The command
 * line prints "obelus: MSG"; a host logs them as it likes. Called
 * from the engine's loop while it works (or from a run's thread, with
 * opt.threads); the strings are valid during the call. cb NULL (the default):
 * notes are dropped. A run's own notes (a retry, a traceback) are events:
 * OBELUS_EVENT_NOTE. */
typedef void (*obelus_note_cb)(const char *kind, const char *call_id, const char *msg,
                               void *data);
void obelus_engine_set_notes(obelus_engine *e, obelus_note_cb cb, void *data);

/* The most HTTP transfers (obelus.http, obelus_http_start) the engine runs
 * at once; the others wait their turn in order (`obelus run --http-max`).
 * 0: the default, 1000. */
void obelus_engine_set_http_max(obelus_engine *e, size_t n);
/* The largest answer body (decoded) a request that gives no max_bytes takes
 * (0: 64 MB); past it the request fails. `obelus run --http-max-bytes`. */
void obelus_engine_set_http_max_bytes(obelus_engine *e, size_t n);
/* Non-zero: requests may connect to link-local and cloud metadata addresses
 * (169.254.0.0/16, fe80::/10, 100.100.100.200, fd00:ec2::254, 0.0.0.0, ...),
 * denied by default. `obelus run --http-allow-private`. */
void obelus_engine_set_http_allow_private(obelus_engine *e, int allow);

/* The loop the engine runs on (the host's, or its own). */
uv_loop_t *obelus_engine_loop(obelus_engine *e);

/* Loads Lua tools (plan-format §9): from a .lua file, or from every *.lua file of a
 * folder, in name order. A file returns one tool table or a list of them;
 * tools run in coroutines on the engine's loop (obelus.sleep, obelus.await,
 * obelus.uv). Returns OBELUS_OK, or a code with the message naming the file
 * (and line): a syntax error, an error raised while loading, a tool table
 * without a name, an unusable schema, a tool name defined twice. Tools
 * loaded before the failure stay loaded. */
int obelus_engine_load_tools(obelus_engine *e, const char *path);

/* Runs a Lua file that configures the engine: it may set the latent handler
 * (obelus.set_latent(fn): runs tools that have no run function, such as an
 * LLM client) and the approver (obelus.set_approver(fn): allows, refuses or
 * replaces each call before it starts). Errors as for tools. */
int obelus_engine_load_script(obelus_engine *e, const char *path);

/* The message of the latest call on this engine, or on one of its runs,
 * that returned an error: "" when that call succeeded (every fallible call
 * starts by clearing it). Owned by the engine; valid until its next call. */
const char *obelus_engine_errmsg(const obelus_engine *e);

/* After obelus_run_new or obelus_run_new_file returned OBELUS_EINVAL for an
 * invalid plan: the number of problems found, and each one as
 * "<plan>: call <id> (<tool>): <what>" (first those found in the plan
 * alone: shape, meta-properties, references, cycles; then each call against
 * its tool). obelus_engine_errmsg holds them all, one a line. 0 / NULL after
 * any other call. Owned by the engine. */
size_t obelus_engine_nproblems(const obelus_engine *e);
const char *obelus_engine_problem(const obelus_engine *e, size_t i);

/* ==== Tools written in C ========================================================== */

/* One running call of a C tool: the handle that completes it. */
typedef struct obelus_call obelus_call;

/* A tool's function. params_json is the call as resolved when it starts,
 * meta-properties included (`_tool`, `_outputPath`, ...), as JSON text
 * (an object) valid until the function returns. data is the pointer given
 * to obelus_engine_add_tool.
 *
 * The function completes the call exactly once, with obelus_call_complete,
 * obelus_call_branch or obelus_call_fail: before it returns, or later from
 * any callback on the engine's loop (a timer, a socket read, ...). Every
 * handle must be completed, even after its run was cancelled or freed
 * (completing then does nothing to the run and only releases the handle);
 * a handle never completed is leaked. The same holds for the handle of an
 * attempt that timed out (_timeout): it is spent, and completing it does
 * nothing even while _retry runs a later attempt of the call, which gets a
 * handle of its own.
 *
 * The scheduler calls the function as the call starts, from inside obelus
 * (obelus_run_start, obelus_call_complete of the call before it, or the
 * loop); so inside it, besides
 * completing calls, you may read and cancel runs and obelus_run_free a run
 * (the free then happens once the scheduler is off the stack, on the loop),
 * but not obelus_engine_free or obelus_run_wait. */
typedef void (*obelus_tool_fn)(obelus_call *call, const char *params_json, void *data);

/* Registers a tool written in C under `name`. schema_json is its JSON
 * Schema (draft-07) as JSON text, or NULL for none: plans are checked
 * against it before they run (literal params) and each call's params are
 * checked again once resolved, as for Lua tools. Returns OBELUS_OK, or:
 * OBELUS_EINVAL (no name or function, the name already taken, an unusable
 * schema), OBELUS_EJSON (schema_json does not parse). */
int obelus_engine_add_tool(obelus_engine *e, const char *name, const char *schema_json,
                           obelus_tool_fn fn, void *data);

/* Completes the call with a result: result_json is JSON text (NULL means
 * null), written to the call's _outputPath (its first || alternative).
 * The handle is spent (released) whatever happens. Returns OBELUS_OK, or
 * OBELUS_EJSON when result_json does not parse: the call then fails with a
 * runtime error saying so. A call without _outputPath (fire-and-forget)
 * just ends. */
int obelus_call_complete(obelus_call *call, const char *result_json);

/* The same, writing to the alternative numbered alt of the call's
 * _outputPath, counted from 0 (0 is what obelus_call_complete writes):
 * with "†state.ok || †state.failed", alt 1 writes to †state.failed. An alt
 * beyond the last alternative fails the call. */
int obelus_call_branch(obelus_call *call, size_t alt, const char *result_json);

/* Completes the call with an error (message: any text). With two or more
 * || alternatives it is handled: {"error", "tool", "call"} is written to the
 * last one (plan-format §3); otherwise it is a runtime error of the call. Spends the
 * handle. */
void obelus_call_fail(obelus_call *call, const char *message);

/* Sends a partial result or progress (JSON text) while the call runs, as a Lua tool's
 * obelus.emit does: an OBELUS_EVENT_PROGRESS event for whoever watches the run, and a
 * "progress" record of the journal. Any number of times before the call completes.
 * OBELUS_OK; OBELUS_EJSON (malformed), or OBELUS_EINVAL when the call has completed, its
 * attempt ended (timed out), or the value is larger than max_output_kb. The handle
 * stays the caller's. */
int obelus_call_emit(obelus_call *call, const char *data_json);

/* The call's id (its _id, "#<index>", or "<id>@<instance>") and its tool's
 * name. Valid until the handle is completed. */
const char *obelus_call_id(const obelus_call *call);
const char *obelus_call_tool(const obelus_call *call);

/* ==== HTTP =========================================================================== */

/* Requests on the engine's loop (libcurl's multi interface, as Lua tools'
 * obelus.http): for a C tool that calls an API and completes its call from
 * the answer, or for the host itself. Connections are reused across
 * requests. Zero-initialise and set what you need. */
typedef struct obelus_http_request {
  const char *method;         /* NULL: "GET" */
  const char *url;
  const char *const *headers; /* "Name: value" lines */
  size_t nheaders;
  const char *body;           /* sent when not NULL (body_len bytes) */
  size_t body_len;
  unsigned long timeout_ms;   /* the whole transfer; 0: 300 s */
  int no_follow;              /* non-zero: do not follow redirects (followed: at most
                                 20, to http and https only) */
  size_t max_bytes;           /* the largest answer body taken (decoded); 0: the
                                 engine's (obelus_engine_set_http_max_bytes) */
  const char *ca_file;        /* trust these CAs (PEM) instead of the system's */
  const char *download;       /* write the body to this file instead */
  unsigned long low_speed_limit; /* bytes/s: slower than this for low_speed_time s, */
  unsigned long low_speed_time;  /* the transfer fails; 0: 1 byte/s, 60 s */
} obelus_http_request;

typedef struct obelus_http_response {
  const char *error;          /* NULL, or the transport failure: "METHOD URL: why" (an
                                 HTTP status is not a failure) */
  long status;
  size_t nheaders;            /* the answer's headers, names in lower case */
  const char *const *names, *const *values;
  const char *body;           /* NULL for a download */
  size_t body_len;
  const char *url;            /* after redirects */
  const char *version;        /* the HTTP version it came in: "1.1", "2", ... */
} obelus_http_response;

typedef struct obelus_http obelus_http;

/* Called once, from the loop, when the transfer ends (unless cancelled
 * first); the response is valid during the call only. */
typedef void (*obelus_http_cb)(const obelus_http_response *res, void *data);

/* Starts a request; *out (may be NULL) is the transfer, for
 * obelus_http_cancel until its callback has been called. OBELUS_OK, or
 * OBELUS_EINVAL with the message on the engine (no url, a URL not http(s) or
 * with a space or control byte, a method or header name not an HTTP token, a
 * header value with a line break, a bad option, a download file that cannot
 * be made). A connection to a denied address (see
 * obelus_engine_set_http_allow_private) fails the transfer. Freeing the engine cancels the
 * transfers left. */
int obelus_http_start(obelus_engine *e, const obelus_http_request *rq, obelus_http_cb cb,
                      void *data, obelus_http **out);
/* Stops a transfer whose callback has not been called: it never is. */
void obelus_http_cancel(obelus_http *x);

/* ==== A job queue in Redis (`obelus submit`, `worker`, `wait`) ======================== */

/* A host's handle on a queue of plan runs in Redis, which `obelus worker`s run:
 * submit plans and wait for their results from the host's loop (the engine's,
 * or the host's own), without the command line. */
typedef struct obelus_queue obelus_queue;

/* Connects, in the background, to the queue `name` (NULL: "obelus") of the Redis at
 * redis_url (redis://[:PASSWORD@]HOST[:PORT][/DB]) on loop. OBELUS_OK with *out
 * set, or OBELUS_EINVAL for a bad URL or name (*out NULL). An unreachable
 * server is told to the submissions and waits that need it. */
int obelus_queue_new(obelus_queue **out, uv_loop_t *loop, const char *redis_url,
                     const char *name);

/* A submission's answer: the job's id, or job NULL and why it failed (Redis
 * unreachable: "cannot reach Redis at URL: ..."). From the loop. */
typedef void (*obelus_submit_cb)(obelus_queue *q, const char *job, const char *error,
                                 void *data);

/* Queues plan_json (either form of plan-format §5) as one job, with the input document
 * input_json (NULL: none). e (may be NULL): the plan is validated against e's
 * tools, and only workers with the same tool files take the job; without e, what
 * can be checked without tools is (the worker checks the rest: a job invalid
 * there ends with exit 2, its problems as its output). name: the plan's name in
 * messages (NULL: "plan"). Returns OBELUS_OK (cb will be called), OBELUS_EJSON
 * when input_json does not parse, or OBELUS_EINVAL for an invalid plan
 * (obelus_queue_errmsg lists every problem; cb will not be called). */
int obelus_queue_submit(obelus_queue *q, obelus_engine *e, const char *plan_json,
                        const char *input_json, const char *name, obelus_submit_cb cb,
                        void *data);

/* A job's end: exit 0, 1 or 2 as `obelus run` would give, output_json its result;
 * error, when set, why it ended without one (a poison job), or why the wait did
 * (exit -1: "timeout", "no such job", Redis unreachable). From the loop. */
typedef void (*obelus_job_cb)(obelus_queue *q, const char *job, int exit,
                              const char *output_json, const char *error, void *data);

/* Calls cb once job has finished, or timeout_ms (0: none) has passed. Blocking
 * reads on a connection of the wait's own (no polling), through reconnections.
 * OBELUS_OK, or OBELUS_EINVAL for a NULL argument. */
int obelus_queue_wait(obelus_queue *q, const char *job, uint64_t timeout_ms, obelus_job_cb cb,
                      void *data);

/* The problems of the last refused submission, one a line ("" when none). */
const char *obelus_queue_errmsg(const obelus_queue *q);

/* Drops the queue's connections: submissions and waits in progress are abandoned,
 * their callbacks never called. Its handles close on the loop's next turn. NULL is
 * allowed. */
void obelus_queue_free(obelus_queue *q);

/* ==== Runs ========================================================================== */

typedef struct obelus_run obelus_run;

/* What the scheduler reports, in the order it happens (plan-format §5). */
typedef enum obelus_event_type {
  OBELUS_EVENT_READY,    /* every call it depends on has settled: it starts next */
  OBELUS_EVENT_STARTED,  /* params resolved and checked; the tool runs */
  OBELUS_EVENT_DONE,     /* its result is written */
  OBELUS_EVENT_SKIPPED,  /* not run: a branch not taken, or something upstream failed */
  OBELUS_EVENT_FAILED,   /* structural or runtime error (an error message is in the log) */
  OBELUS_EVENT_RUN_DONE, /* every awaited call has settled: the completion callback follows */
  OBELUS_EVENT_NOTE,     /* something the engine says about the run, for people: a failed
                            attempt that is retried ("retry"), a tool's traceback
                            ("traceback"), ...; `note` is the kind, `reason` the text,
                            call_id the call when there is one. Added after run_done:
                            the values above keep their numbers */
  OBELUS_EVENT_PROGRESS  /* added last: a running call sent a partial result or its progress
                            (obelus.emit in a Lua tool, obelus_call_emit in a C tool):
                            `data_json` is the value, `attempt` the attempt's number */
} obelus_event_type;

/* "ready", "started", "done", "skipped", "failed", "run_done", "note", "progress". */
const char *obelus_event_name(obelus_event_type type);

typedef struct obelus_event {
  obelus_event_type type;
  const char *call_id;  /* the call's id; NULL for OBELUS_EVENT_RUN_DONE */
  const char *tool;     /* its tool's name; NULL for OBELUS_EVENT_RUN_DONE */
  size_t call_index;    /* its position in the plan (instance copies follow the
                           plan's calls); (size_t)-1 for OBELUS_EVENT_RUN_DONE */
  const char *reason;   /* skipped or failed: why; else NULL */
  double t_ms;          /* when it happened: milliseconds since the run started */
  size_t position;      /* the number of messages in the run's log when it
                           happened: with time_travel, obelus_run_resolve(...,
                           position, ...) reads the run exactly as it was then */
  const char *note;     /* OBELUS_EVENT_NOTE: its kind ("retry", "traceback",
                           "error_routed", "record", "rerun", ...); else NULL.
                           Last: the fields above keep their offsets */
  const char *data_json; /* OBELUS_EVENT_PROGRESS: the value the call sent, as JSON
                            text; else NULL */
  unsigned attempt;     /* the call's attempt (from 1) for a call's event; else 0.
                           Added after note: the fields above keep their offsets */
  const char *value_json; /* OBELUS_EVENT_DONE: the value the call wrote at its output
                             path, as JSON text, when it is 4096 bytes or less; else NULL */
  size_t value_size;    /* OBELUS_EVENT_DONE: that value's size in bytes of JSON (also
                           when too large to carry); 0 when the call wrote no value */
  int handled;          /* OBELUS_EVENT_DONE: the value is an error a || alternative
                           received (the call raised), not a result */
  const char *each_id;  /* a copy's event (call_id "ID[i]", call_index its _each call's):
                           the id of the _each call it is a copy of; else NULL */
} obelus_event;

/* Called for each event, from the loop, shortly after the event (in the same
 * loop iteration or the next): the run may have moved on since; `position`
 * tells where it was. Strings are valid during the callback. */
typedef void (*obelus_event_cb)(obelus_run *run, const obelus_event *ev, void *data);

/* Called once, from the loop, when every awaited call has settled. status
 * is the run's exit status as plan-format §12 defines it: 0 every awaited call done
 * or skipped, 1 some call failed (an error no || alternative handled).
 * output_json is the final output (plan-format §5: the plan's "output" template
 * resolved, or the state document), valid during the callback. Fire-and-
 * forget calls may still be running (obelus_run_detached). You may free the
 * run from here. */
typedef void (*obelus_done_cb)(obelus_run *run, int status, const char *output_json, void *data);

/* How to run a plan. Zero-initialise it ({0}) and set what you need; NULL
 * gives every default. New fields are only ever added at the end. */
typedef struct obelus_run_options {
  const char *name;         /* the plan's name in messages; default "plan" (for
                               obelus_run_new_file: the path) */
  const char *input;        /* JSON text of an input document, added after the plan's
                               context as {"type":"data","kind":"input","data":...}
                               (what `obelus run --input` does); NULL for none */
  size_t concurrency;       /* at most this many calls running at once, the calls of its
                               delegated plans included (one bound, not one per plan);
                               0: unlimited */
  int time_travel;          /* non-zero: keep every version of every document, so
                               obelus_run_resolve can read as of any position (costs
                               memory and time on long runs; off by default) */
  int max_depth;            /* deepest _delegate nesting allowed; 0: 16 */
  FILE *journal;            /* the log as JSON Lines, written as it grows, with the
                               records `obelus resume` and obelus_resume read (the
                               host opens and closes it; the run writes through a
                               descriptor of its own, appending, and is done with it
                               when freed), ending with the end record once the run
                               has finished and no fire-and-forget call runs (or it
                               is cancelled or freed after finishing); NULL: none.
                               obelus_run_new_file refuses (OBELUS_EINVAL) a journal
                               that is its plan file, under any name */
  obelus_event_cb on_event; /* NULL: no events (and nothing spent on them) */
  obelus_done_cb on_done;   /* NULL: poll obelus_run_status, or obelus_run_wait */
  void *data;               /* given back to both callbacks */
  const char *fsync;        /* the journal's durability: "never", "batch" (NULL: the
                               default) or "always", as `obelus run --fsync` */
  const char *plans_root;   /* the folder every _delegate path must lead into, symbolic
                               links followed (`obelus run --plans-root`); NULL: the
                               plan file's folder for obelus_run_new_file, the current
                               directory for a plan given as text. A path outside it
                               (absolute, climbing out with "..", or resolving outside)
                               makes the plan invalid, and is refused again when the
                               call runs */
  int force;                /* obelus_resume: non-zero takes the journal up even when
                               the plan or tool files changed since the run */
  unsigned call_timeout_ms; /* a _timeout for every call without one, per attempt
                               (`--call-timeout`); 0: none */
  size_t max_output_kb;     /* the largest message a call may write, in KB of JSON
                               text; a larger result fails the call, a longer error
                               message is cut (`--max-output`); 0: the default,
                               65536 (64 MB) */
  size_t max_calls;         /* the most calls in all: the plan's (instances counted;
                               more makes the plan invalid), its delegated plans' and
                               their plans' (a delegation that would pass it fails its
                               call) (`--max-calls`); 0: the default, 1000000 */
  size_t threads;           /* a plan with "instances": share them out over this many
                               threads, each with an engine of its own that loads the
                               engine's tool files and scripts again, in the order they
                               were loaded (`obelus run --threads`); 0 or 1: one engine.
                               A plan without instances, an engine with C tools
                               (obelus_engine_add_tool), concurrency 1 or fsync
                               "always" run on one engine whatever this says. On
                               threads, on_event is called on the engine's loop with
                               position 0; obelus_run_resolve, _message and _position
                               have no log to read (a run on threads has one per
                               thread) and fail or give 0; obelus_run_detached is 0 */
} obelus_run_options;

/* Makes a run of the plan in plan_json (either form of plan-format §5: an array of
 * calls, or {"context", "plan", "output", "instances"}) and validates
 * everything before anything runs: the plan's shape, every call against its
 * tool and the tool's schema, every reference and output path, the
 * dependency graph (cycles), the context messages and the input. opt may be
 * NULL. Nothing runs until obelus_run_start. Returns OBELUS_OK with *out
 * set, or with *out NULL:
 *   OBELUS_EJSON   plan_json (or opt->input) does not parse;
 *   OBELUS_EINVAL  the plan is invalid: obelus_engine_nproblems/_problem list
 *                  every problem (and obelus_engine_errmsg holds them all), or
 *                  an argument is NULL.
 * The run keeps its own copy of the plan. */
int obelus_run_new(obelus_engine *e, obelus_run **out, const char *plan_json,
                   const obelus_run_options *opt);

/* The same for a plan file; OBELUS_EIO when it cannot be read. A call's
 * _delegate path is read relative to the plan's folder (that of opt->name when
 * given, as for a plan given as text). */
int obelus_run_new_file(obelus_engine *e, obelus_run **out, const char *path,
                        const obelus_run_options *opt);

/* Takes up the run whose journal (opt->journal of obelus_run_new, `obelus run
 * --journal`) is the file at journal_path, after a crash, a kill or a cancel:
 * returns a run to start and wait for like any other, which rebuilds the log
 * from the journal, runs only the calls that did not complete (a call that
 * had started and not completed runs again: at least once), appends to the
 * same journal (opened again, under opt->fsync) and ends as the
 * uninterrupted run would have: the same on_done status and output, the same
 * obelus_run_output. A journal of a run that ended: the run finishes as soon
 * as it starts, with the recorded status and output, running nothing and
 * writing nothing. The plan is the one the journal holds; tools are the
 * engine's: load the same tool files (and register the same C tools) first.
 * opt as for obelus_run_new (may be NULL), but journal and input must be
 * NULL (the run's are in the journal). Nothing runs until obelus_run_start.
 * Returns OBELUS_OK with *out set, or with *out NULL:
 *   OBELUS_EIO     the journal cannot be read, or written to;
 *   OBELUS_EJSON   a line of it (other than a torn last one) is not JSON;
 *   OBELUS_EINVAL  not a journal, or of a run that never began; the plan is
 *                  invalid against the engine's tools (problems as for
 *                  obelus_run_new); the plan file, a delegated plan file or a
 *                  tool file changed since the run, or a tool file is loaded
 *                  now that was not then, or the reverse (obelus_engine_errmsg
 *                  says which), and opt->force is 0; a journal of `obelus
 *                  loop` (resume those with `obelus resume`).
 * What `obelus resume` says, a host gets as notes: a torn last line ignored
 * ("torn") and messages of a call that never settled dropped ("dropped")
 * through obelus_engine_set_notes; a call that runs again as the run's
 * OBELUS_EVENT_NOTE "rerun" when it starts. */
int obelus_resume(obelus_engine *e, obelus_run **out, const char *journal_path,
                  const obelus_run_options *opt);

/* What obelus_fork forks from and changes (`obelus fork`'s options). */
typedef struct obelus_fork_options {
  const char *journal;       /* the fork's own journal: a new file (required) */
  const char *from;          /* run again from this call of the journal's top-level plan
                                (and all that follows from it); NULL: use at */
  long long at;              /* keep the journal's first `at` messages (as `obelus log --at`
                                counts them), when from is NULL */
  const char *const *sets;   /* nsets changes "REF=JSON" ("\u2020state.city=\"Oslo\""),
                                each written as a message of its own before the run goes on */
  size_t nsets;
  const char *const *inputs; /* ninputs input documents as JSON text, written the same way */
  size_t ninputs;
  int overwrite;             /* non-zero: an existing non-empty journal may be replaced */
} obelus_fork_options;

/* Starts a new run from a point of the run journal_path tells of (finished, failed or
 * killed), with changes, as `obelus fork` does: fork->journal is written with the
 * journal's messages up to the point (its first record names the source and the
 * point), then each change as a message of its own, and the run goes on there: every
 * call that had not completed before the point, fork->from, every call reading a path
 * a change touched, and everything that depends on them runs; the others keep their
 * results. journal_path is never written. The returned run is like obelus_resume's of
 * the new journal (start it, wait for it; obelus_resume takes a killed fork up). opt as
 * for obelus_resume (may be NULL; journal and input must be NULL; force is not needed:
 * files that changed since the run are said as a note "changed", not refused).
 * Returns OBELUS_OK with *out set, or with *out NULL:
 *   OBELUS_EIO     a journal cannot be read, or the new one written (or exists);
 *   OBELUS_EINVAL  no point or a bad one (from not a call of the plan: a copy "ID[i]"
 *                  of an _each call or a call of a delegated plan is forked from the
 *                  call that made it; at before the run began or past its messages), a
 *                  change that does not parse, a journal of `obelus loop`, or the plan
 *                  invalid against the engine's tools (obelus_engine_errmsg says). */
int obelus_fork(obelus_engine *e, obelus_run **out, const char *journal_path,
                const obelus_fork_options *fork, const obelus_run_options *opt);

/* Starts every call that is ready; the rest happens on the loop as the host
 * runs it. C tools may be called (and complete) before this returns, but
 * callbacks are not: they come from the loop. Returns OBELUS_OK, OBELUS_EINVAL
 * when the run was started already, OBELUS_ECANCELED when it was cancelled. */
int obelus_run_start(obelus_run *run);

/* Runs the engine's loop (uv_run, UV_RUN_ONCE at a time: the host's other
 * handles on that loop run too) until the run's completion has been
 * delivered (its on_done called, if it has one), and returns the run's
 * status: 0 or 1 (as on_done gets it),
 * or OBELUS_ECANCELED when the run was cancelled or freed meanwhile (from a
 * callback). If the loop runs out of work while calls still wait (a Lua
 * tool awaiting a callback that can never come), those calls fail as
 * stalled (obelus_run_fail_stalled) and the run goes on. Returns
 * OBELUS_EINVAL for a run not started, OBELUS_EBUSY when called from inside
 * a callback of this engine (the loop is already running); OBELUS_EIO when its
 * journal could not be written (a full disk, an I/O error): the run was stopped
 * there, no call started after it (obelus_resume takes it up). Useful with the
 * engine's own loop; with the host's loop, the host usually runs it. */
int obelus_run_wait(obelus_run *run);

/* Abandons the run: the calls still running are dropped (their coroutines,
 * timers and sleeps; their results are never written), nothing else
 * starts, nothing more is written to the log, events not yet delivered are
 * discarded and no callback of this run is called any more. A C tool's
 * handle may still be completed (harmlessly). The run stays readable
 * (resolve, output, messages) until freed. Safe from any callback, and on a
 * run already cancelled or finished. */
void obelus_run_cancel(obelus_run *run);

/* Frees the run (cancelling it first), its log and its copy of the plan.
 * From a C tool's function it is deferred until the scheduler is off the
 * stack (the run is cancelled at once and must not be used again either
 * way). NULL is allowed. */
void obelus_run_free(obelus_run *run);

/* 0 or 1 once finished (the exit status of plan-format §12, as on_done gets it);
 * OBELUS_EBUSY while not finished (or not started); OBELUS_ECANCELED when it
 * was cancelled before it finished. */
int obelus_run_status(const obelus_run *run);

/* Fire-and-forget calls (no _outputPath) not settled yet: running, or still
 * to start. They do not hold the run's completion back; they go on while the
 * loop runs and the run lives, and are abandoned when it is cancelled or
 * freed. */
size_t obelus_run_detached(const obelus_run *run);

/* The final output (plan-format §5) as JSON text, malloc'ed (free() it): the plan's
 * "output" template resolved (absent references become null), or the
 * global state document ({} when none); for a plan with "instances", an
 * object from instance id to that instance's output. Before the run has
 * finished it is the output as things stand. */
char *obelus_run_output(obelus_run *run);

/* Position meaning "the log as it is now" for obelus_run_resolve. */
#define OBELUS_NOW ((size_t)-1)

/* Reads a reference expression on the run's log (plan-format §2-3): "†state.user",
 * "†state.sunny || †state.rainy", "†input.a && †input.b". instance: NULL for
 * the global documents, or an instance id to read in that instance's view
 * (plan-format §6). at: OBELUS_NOW, or N to read the log as it was after its first N
 * messages (the log starts with the plan message, then the plan's context
 * and input); N at or beyond the log's length reads it as it is. On success
 * *json_out is the value as JSON text, malloc'ed (free() it). Returns
 * OBELUS_OK, or with *json_out NULL:
 *   OBELUS_ENOENT   absent;
 *   OBELUS_ESYNTAX  malformed expression: the message names the problem and
 *                   its 0-based character position;
 *   OBELUS_EINVAL   at names an earlier position but the run was made
 *                   without time_travel, so earlier versions are gone. */
int obelus_run_resolve(obelus_run *run, const char *expr, const char *instance, size_t at,
                       char **json_out);

/* The number of messages in the run's log so far. */
size_t obelus_run_position(const obelus_run *run);

/* Message i of the run's log (i < obelus_run_position) as JSON text,
 * malloc'ed (free() it); NULL when i is out of range. The same lines a
 * journal gets. */
char *obelus_run_message(obelus_run *run, size_t i);

/* For a host that runs the loop itself: when the loop has run out of work
 * (uv_run returned 0, or uv_loop_alive is 0) while the run has not finished,
 * the calls still running wait for something that can no longer happen;
 * this fails each of them ("stalled", a runtime error) so the run can
 * settle. Returns how many. Never needed with obelus_run_wait. */
size_t obelus_run_fail_stalled(obelus_run *run);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
