/* ob_mcp.c -- the Model Context Protocol server (ob_mcp.h).
 *
 * Messages are JSON-RPC 2.0 objects. Requests handled: initialize (the client's
 * protocol version when we speak it, else our newest), ping, tools/list (the
 * engine's tools as ob_catalog gives them for MCP, and run_plan), tools/call.
 * Notifications (a message without an id) are never answered (JSON-RPC 2.0):
 * notifications/cancelled cancels the request's run, the others are ignored. A request
 * for another method: -32601; a line that is not JSON: -32700 with id null; not a
 * request (no jsonrpc "2.0", no method and no result/error, a bad id): -32600; a
 * response (result or error, no method) is ignored: we send no requests.
 *
 * Batches (a line holding a JSON array of messages, JSON-RPC 2.0): taken in a session
 * that negotiated 2025-03-26, the one MCP revision with them (2025-06-18 removed
 * them); at another revision, or before initialize, the line gets one -32600 (id
 * null) saying so. Each member is handled as a line of its own would be (one that is
 * not a request gets its own -32600; initialize may not be one); the answers of its
 * requests go out together as one array once the last is ready (tools/call members
 * run concurrently, like separate requests); a batch of notifications alone gets no
 * answer; an empty batch is one -32600 (id null), not an array. A batch has at most
 * OB_MCP_MAX_BATCH members: counted on the text before it is parsed (a scan of its
 * top level), so a line of 100,000 members is refused, -32600, without its values
 * being built.
 *
 * Lines (ob_mcp_feed): bytes are split at newlines as they come, each byte looked at
 * once (a line arriving in many reads costs its length, not its length times the
 * reads); a line is held until its newline, up to max_line bytes (OB_MCP_MAX_LINE by
 * default): past that the line's bytes are dropped as they come, the client gets one
 * -32600 with id null, and reading goes on after the line's newline.
 *
 * tools/list names each tool by its real name (MCP takes any string: its 2025-11-25
 * revision only advises ^[A-Za-z0-9_.-]{1,128}$); tools/call also takes the API name
 * `obelus tools --format openai` gives (ob_toolname.h), the real name winning.
 * tools/call runs a plan: run_plan's own, or for a tool T the one-call plan
 * {"plan": [{"_tool": T, ...arguments, "_outputPath": "†state.result"}], "output":
 * "†state.result"}, whose strings beginning with † are escaped (††) so that they
 * stay strings. It is validated first (problems: a result with isError), then run
 * on the engine's loop. Runs end in the reaper (the driver's deferred work:
 * ob_drive_defer), out of the scheduler's callbacks: the answer carries the output as JSON text in content
 * and, with the exit status and the error messages, in structuredContent. An error
 * message is the engine's whole (cut already past 64 KB or --max-output, saying so);
 * a name in a message (a call id, a tool, a method) is cut past 1 KB at a character's
 * start, with " ... (id cut at 1 KB of N KB)" saying so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/ob_catalog.h"
#include "host/ob_mcp.h"
#include "base/ob_mem.h"
#include "plan/ob_plan.h"
#include "plan/ob_toolname.h"
#include "drive/ob_drive.h"
#include "engine/ob_run.h"

static const char *const VERSIONS[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};
#define DAGGER "\xE2\x80\xA0"

/* A batch whose answers are being gathered: its requests still running (tools/call
 * members) and whether its members are still being handled; sent and freed when
 * both are done. */
typedef struct batch {
  ob_value *answers; /* the array being filled */
  size_t waiting;
  int open;
} batch;

typedef struct req {
  ob_mcp *m;
  struct req *next;
  batch *batch;       /* the batch it came in, or NULL */
  ob_value *id;       /* the request's id */
  ob_value *token;    /* _meta.progressToken, or NULL */
  ob_value *plan_value; /* the plan made of the request, until it is prepared */
  ob_drun *d;         /* its run (ob_drive.h), once prepared */
  int is_tool;        /* a tool's call (its output alone), not run_plan */
  int finished, cancelled;
  size_t settled;
  size_t emits;       /* progress events since the last call settled */
} req;

struct ob_mcp {
  ob_engine *e;
  ob_mcp_send_fn send;
  void *ud;
  req *reqs;
  ob_drive *dv;       /* the requests' runs: the reaper runs as its deferred work */
  ob_buf line;     /* the line being read, before its newline */
  size_t max_line; /* its bound in bytes */
  int skipping;    /* the line passed max_line: its bytes dropped until its newline */
  unsigned max_slice_ms; /* each run's (ob_run_options.max_slice_ms; 0: the default) */
  const char *version;   /* the protocol version initialize agreed on (VERSIONS), or NULL */
  batch *cur;            /* the batch whose members are being handled, or NULL */
};

static void send_value(ob_mcp *m, ob_value *v) {
  size_t len;
  char *text = ob_json_print(v, OB_JSON_COMPACT, &len);
  m->send(m->ud, text, len);
  free(text);
  ob_unref(v);
}

/* An answer: on a line of its own, or into its batch's array. */
static void deliver(ob_mcp *m, batch *b, ob_value *v) {
  if (b)
    b->answers = ob_array_push(b->answers, v);
  else
    send_value(m, v);
}

/* The batch's array sent (when it holds an answer) and the batch freed, once its
 * members are handled and its requests answered or cancelled. */
static void batch_settle(ob_mcp *m, batch *b) {
  if (b->open || b->waiting)
    return;
  if (ob_array_len(b->answers))
    send_value(m, b->answers);
  else
    ob_unref(b->answers);
  free(b);
}

static ob_value *envelope(const ob_value *id) {
  ob_value *o = ob_object_set(ob_object(), "jsonrpc", 7, ob_cstring("2.0"));
  return ob_object_set(o, "id", 2, id ? ob_ref((ob_value *)id) : ob_null());
}

/* Answers to the message being handled (into its batch, if it is in one). */
static void reply(ob_mcp *m, const ob_value *id, ob_value *result) {
  deliver(m, m->cur, ob_object_set(envelope(id), "result", 6, result));
}

static void reply_error(ob_mcp *m, const ob_value *id, int code, const char *msg) {
  ob_value *e = ob_object_set(ob_object(), "code", 4, ob_int(code));
  e = ob_object_set(e, "message", 7, ob_cstring(msg));
  deliver(m, m->cur, ob_object_set(envelope(id), "error", 5, e));
}

static ob_value *text_content(const char *text) {
  ob_value *c = ob_object_set(ob_object(), "type", 4, ob_cstring("text"));
  return ob_object_set(c, "text", 4, ob_cstring(text));
}

/* A tools/call result: content (texts), structuredContent, isError. */
static ob_value *call_result(ob_value *texts, ob_value *structured, int is_error) {
  ob_value *r = ob_object_set(ob_object(), "content", 7, texts);
  if (structured)
    r = ob_object_set(r, "structuredContent", 17, structured);
  return ob_object_set(r, "isError", 7, ob_bool(is_error));
}

/* --- runs ----------------------------------------------------------------------------------- */

/* Text a request or a plan chose (an id, a tool or method name, an error message) put
 * in an answer: cut past max bytes at a character's start, and saying so (ob_buf_cut):
 * a client shows it, and must never see a character broken in two. */
enum { NAME_MAX_BYTES = 1024 };
static ob_value *cut_text(ob_buf *b, size_t max, const char *what) {
  ob_buf_cut(b, max, what);
  ob_value *v = ob_string(b->data ? b->data : "", b->len);
  ob_buf_free(b);
  return v;
}

static void req_free(req *q) {
  ob_drun_free(q->d); /* what the run's tools spawned is killed with it (ob_run_free) */
  ob_unref(q->plan_value);
  ob_unref(q->id);
  ob_unref(q->token);
  free(q);
}

/* The answer of a finished request's run. */
static ob_value *finish(req *q) {
  ob_run *r = ob_drun_run(q->d);
  int exit = ob_drun_exit_status(q->d);
  ob_value *out = ob_drun_output(q->d);
  ob_value *errors = ob_array();
  ob_log *log = ob_run_log(r);
  for (size_t i = 0; i < ob_log_len(log); i++) {
    ob_value *msg = ob_log_message(log, i);
    const ob_value *kind = ob_object_get(msg, "kind", 4), *data = ob_object_get(msg, "data", 4);
    if (kind && ob_typeof(kind) == OB_STRING && !strcmp(ob_string_ptr(kind), "error") && data) {
      const ob_value *id = ob_object_get(data, "id", 2), *err = ob_object_get(data, "error", 5);
      /* the message is the engine's, cut already (ob_message_max: 64 KB, saying so) */
      ob_buf name;
      ob_buf_init(&name);
      ob_buf_addf(&name, "%s", id && ob_typeof(id) == OB_STRING ? ob_string_ptr(id) : "?");
      ob_value *idv = cut_text(&name, NAME_MAX_BYTES, "id");
      ob_buf line;
      ob_buf_init(&line);
      ob_buf_addf(&line, "call %s: ", ob_string_ptr(idv));
      if (err && ob_typeof(err) == OB_STRING)
        ob_buf_add(&line, ob_string_ptr(err), ob_string_len(err));
      else
        ob_buf_addf(&line, "failed");
      ob_unref(idv);
      errors = ob_array_push(errors, ob_string(line.data, line.len));
      ob_buf_free(&line);
    }
    ob_unref(msg);
  }
  char *text = ob_json_print(out, OB_JSON_COMPACT, NULL);
  ob_value *texts = ob_array_push(ob_array(), text_content(text));
  free(text);
  if (exit) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "exit %d", exit);
    for (size_t i = 0; i < ob_array_len(errors); i++)
      ob_buf_addf(&b, "\n%s", ob_string_ptr(ob_array_get(errors, i)));
    texts = ob_array_push(texts, text_content(b.data));
    ob_buf_free(&b);
  }
  ob_value *st = ob_object_set(ob_object(), "output", 6, out);
  st = ob_object_set(st, "exit", 4, ob_int(exit));
  st = ob_object_set(st, "errors", 6, errors);
  return ob_object_set(envelope(q->id), "result", 6, call_result(texts, st, exit != 0));
}

/* Requests that finished are answered, those cancelled dropped. The run is freed
 * first (what its tools spawned killed with it: ob_run_free), then the answer goes. */
static void reap(void *ud) {
  ob_mcp *m = ud;
  for (req **pp = &m->reqs; *pp;) {
    req *q = *pp;
    if (q->finished || q->cancelled) {
      ob_value *answer = q->finished && !q->cancelled ? finish(q) : NULL;
      batch *b = q->batch;
      *pp = q->next;
      req_free(q);
      if (answer)
        deliver(m, b, answer);
      if (b) {
        b->waiting--;
        batch_settle(m, b);
      }
    } else {
      pp = &q->next;
    }
  }
}

static void schedule_reap(ob_mcp *m) { ob_drive_defer(m->dv); }

static void on_done(ob_run *r, void *ud) {
  req *q = ud;
  (void)r;
  q->finished = 1;
  schedule_reap(q->m);
}

static void on_event(void *ud, const ob_event *ev) {
  req *q = ud;
  ob_event_to_note(q->m->e, ev); /* a note, a failure: said as the engine's (the note hook) */
  int settles = ev->type == OB_EV_DONE || ev->type == OB_EV_FAILED || ev->type == OB_EV_SKIPPED;
  /* a copy of an _each call settling is a part of that call's step, as an emit is */
  int emitted = ev->type == OB_EV_PROGRESS || (settles && ev->each);
  if (!emitted && !settles)
    return;
  if (emitted) {
    q->emits++;
  } else {
    q->settled++;
    q->emits = 0;
  }
  if (!q->token || q->cancelled)
    return;
  /* progress must grow with every notification: a call's emits count as parts of the
   * next call's step, k / (k + 1) of it, so the next call settling is still more */
  ob_value *p = ob_object_set(ob_object(), "progressToken", 13, ob_ref(q->token));
  p = ob_object_set(p, "progress", 8,
                    emitted ? ob_real((double)q->settled + (double)q->emits / (q->emits + 1.0))
                            : ob_int((int64_t)q->settled));
  p = ob_object_set(p, "total", 5, ob_int((int64_t)ob_drun_plan(q->d)->ncalls));
  ob_buf msg;
  ob_buf_init(&msg);
  ob_buf_addf(&msg, "%s %s", ev->call ? ev->call->id : "?", ob_event_name(ev->type));
  if (ev->type == OB_EV_PROGRESS) { /* the value, as JSON text (cut like every message) */
    ob_buf_addc(&msg, ' ');
    ob_json_write(&msg, ev->data, OB_JSON_COMPACT);
  }
  p = ob_object_set(p, "message", 7, cut_text(&msg, NAME_MAX_BYTES, "message"));
  ob_value *n = ob_object_set(ob_object(), "jsonrpc", 7, ob_cstring("2.0"));
  n = ob_object_set(n, "method", 6, ob_cstring("notifications/progress"));
  send_value(q->m, ob_object_set(n, "params", 6, p));
}

/* tools/call: a plan made, validated and started. */
static void tools_call(ob_mcp *m, const ob_value *id, const ob_value *params) {
  const ob_value *name = params ? ob_object_get(params, "name", 4) : NULL;
  const ob_value *args = params ? ob_object_get(params, "arguments", 9) : NULL;
  if (!name || ob_typeof(name) != OB_STRING) {
    reply_error(m, id, -32602, "tools/call needs params.name");
    return;
  }
  if (args && ob_typeof(args) != OB_OBJECT) {
    reply_error(m, id, -32602, "tools/call: arguments must be an object");
    return;
  }
  const char *tool = ob_string_ptr(name);
  req *q = ob_xcalloc(1, sizeof *q);
  q->m = m;
  q->id = ob_ref((ob_value *)id);
  const ob_value *meta = ob_object_get(params, "_meta", 5);
  const ob_value *token = meta && ob_typeof(meta) == OB_OBJECT ? ob_object_get(meta, "progressToken", 13) : NULL;
  q->token = token ? ob_ref((ob_value *)token) : NULL;
  ob_value *inputs = NULL;
  if (!strcmp(tool, "run_plan")) {
    const ob_value *plan = args ? ob_object_get(args, "plan", 4) : NULL;
    const ob_value *input = args ? ob_object_get(args, "input", 5) : NULL;
    if (!plan || (ob_typeof(plan) != OB_OBJECT && ob_typeof(plan) != OB_ARRAY)) {
      reply(m, id, call_result(ob_array_push(ob_array(), text_content("run_plan needs arguments.plan, "
                                                                        "a plan (an object or an array of calls)")),
                               NULL, 1));
      req_free(q);
      return;
    }
    q->plan_value = ob_ref((ob_value *)plan);
    if (input)
      inputs = ob_array_push(ob_array(), ob_ref((ob_value *)input));
  } else {
    /* by its name, or the API name a client that sanitized names gives (ob_toolname.h) */
    ob_toolname_resolver names;
    ob_toolname_resolver_init(&names, &m->e->tools);
    const ob_tool *t = ob_toolname_resolve(&names, tool, ob_string_len(name));
    ob_toolname_resolver_free(&names);
    if (!t) {
      ob_buf msg;
      ob_buf_init(&msg);
      ob_buf_addf(&msg, "unknown tool: %s", tool);
      ob_value *text = cut_text(&msg, NAME_MAX_BYTES, "message");
      reply_error(m, id, -32602, ob_string_ptr(text));
      ob_unref(text);
      req_free(q);
      return;
    }
    /* where the result goes: the path the tool's schema demands, if it does (a branching
     * tool's "†state.a || †state.b"), else †state.result; the output reads the same */
    const char *out = DAGGER "state.result";
    const ob_value *props = t->schema_value && ob_typeof(t->schema_value) == OB_OBJECT
                                ? ob_object_get(t->schema_value, "properties", 10) : NULL;
    const ob_value *op = props && ob_typeof(props) == OB_OBJECT ? ob_object_get(props, "_outputPath", 11) : NULL;
    const ob_value *c = op && ob_typeof(op) == OB_OBJECT ? ob_object_get(op, "const", 5) : NULL;
    const ob_value *en = op && ob_typeof(op) == OB_OBJECT ? ob_object_get(op, "enum", 4) : NULL;
    if (c && ob_typeof(c) == OB_STRING)
      out = ob_string_ptr(c);
    else if (en && ob_typeof(en) == OB_ARRAY && ob_array_len(en) &&
             ob_typeof(ob_array_get(en, 0)) == OB_STRING)
      out = ob_string_ptr(ob_array_get(en, 0));
    ob_value *call = args ? ob_str_escape(args) : ob_object(); /* a tool's arguments are values */
    call = ob_object_set(call, "_tool", 5, ob_cstring(t->name));
    call = ob_object_set(call, "_outputPath", 11, ob_cstring(out));
    ob_value *pv = ob_object_set(ob_object(), "plan", 4, ob_array_push(ob_array(), call));
    q->plan_value = ob_object_set(pv, "output", 6, ob_cstring(out));
    q->is_tool = 1;
  }
  /* the plans root is the current directory: the plan has no file */
  ob_error err;
  const char *pname = q->is_tool ? tool : "run_plan";
  ob_drive_source src = {.name = pname, .plan = q->plan_value, .inputs = inputs,
                         .input_label = "input"};
  q->plan_value = NULL; /* the driver's */
  ob_drun *d = q->d = ob_drun_prepare(m->e, &src, &err);
  ob_value *errs = ob_array();
  if (!d) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%s: %s", pname, err.msg);
    errs = ob_array_push(errs, ob_string(b.data, b.len));
    ob_buf_free(&b);
  }
  for (size_t i = 0; d && i < ob_drun_plan(d)->nerrors; i++)
    errs = ob_array_push(errs, ob_cstring(ob_drun_plan(d)->errors[i]));
  size_t n = ob_array_len(errs);
  if (n) {
    ob_buf b;
    ob_buf_init(&b);
    ob_buf_addf(&b, "%zu problem%s, nothing ran:", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++)
      ob_buf_addf(&b, "\n%s", ob_string_ptr(ob_array_get(errs, i)));
    ob_value *st = ob_object_set(ob_object_set(ob_object(), "exit", 4, ob_int(2)), "errors", 6, errs);
    reply(m, id, call_result(ob_array_push(ob_array(), text_content(b.data)), st, 1));
    ob_buf_free(&b);
    req_free(q);
    return;
  }
  ob_unref(errs);
  ob_run_options ro = {.on_done = on_done, .on_event = on_event, .ud = q,
                       .max_slice_ms = m->max_slice_ms};
  if (ob_drun_make(d, &ro, &err) != OB_OK) {
    reply(m, id, call_result(ob_array_push(ob_array(), text_content(err.msg)), NULL, 1));
    req_free(q);
    return;
  }
  ob_drun_attach(d, m->dv, q);
  q->next = m->reqs;
  m->reqs = q;
  if ((q->batch = m->cur))
    q->batch->waiting++;
  ob_drun_start(d, NULL, NULL, NULL, 0, &err); /* on one engine: ob_run_start */
}

/* --- messages ------------------------------------------------------------------------------- */

static void initialize(ob_mcp *m, const ob_value *id, const ob_value *params) {
  const ob_value *want = params ? ob_object_get(params, "protocolVersion", 15) : NULL;
  const char *version = VERSIONS[0];
  for (size_t i = 0; want && ob_typeof(want) == OB_STRING && i < sizeof VERSIONS / sizeof *VERSIONS; i++)
    if (!strcmp(ob_string_ptr(want), VERSIONS[i]))
      version = VERSIONS[i];
  ob_value *caps = ob_object_set(ob_object(), "tools", 5,
                                 ob_object_set(ob_object(), "listChanged", 11, ob_false()));
  ob_value *info = ob_object_set(ob_object(), "name", 4, ob_cstring("obelus"));
  info = ob_object_set(info, "version", 7, ob_cstring(OB_VERSION));
  m->version = version;
  ob_value *r = ob_object_set(ob_object(), "protocolVersion", 15, ob_cstring(version));
  r = ob_object_set(r, "capabilities", 12, caps);
  r = ob_object_set(r, "serverInfo", 10, info);
  r = ob_object_set(r, "instructions", 12,
                    ob_cstring("Each tool runs as a one-call obelus plan; run_plan runs a whole plan "
                               "(the plan format: calls wired together through references like "
                               DAGGER "state.x) and returns its final output."));
  reply(m, id, r);
}

static void tools_list(ob_mcp *m, const ob_value *id) {
  ob_value *list = ob_catalog_tools(m->e, OB_CATALOG_MCP);
  ob_value *tools = ob_ref(ob_object_get(list, "tools", 5));
  ob_unref(list);
  ob_value *props = ob_object();
  props = ob_object_set(props, "plan", 4,
                        ob_object_set(ob_object_set(ob_object(), "type", 4,
                                                    ob_array_push(ob_array_push(ob_array(), ob_cstring("object")),
                                                                  ob_cstring("array"))),
                                      "description", 11,
                                      ob_cstring("the plan: {\"plan\": [calls], \"context\", \"output\", "
                                                 "\"instances\"}, or an array of calls")));
  props = ob_object_set(props, "input", 5,
                        ob_object_set(ob_object(), "description", 11,
                                      ob_cstring("an input document the plan reads as " DAGGER "input")));
  ob_value *schema = ob_object_set(ob_object(), "type", 4, ob_cstring("object"));
  schema = ob_object_set(schema, "properties", 10, props);
  schema = ob_object_set(schema, "required", 8, ob_array_push(ob_array(), ob_cstring("plan")));
  ob_value *rp = ob_object_set(ob_object(), "name", 4, ob_cstring("run_plan"));
  rp = ob_object_set(rp, "description", 11,
                     ob_cstring("Runs an obelus plan on this server's tools, calls concurrently as "
                                "their inputs exist; returns the final output as JSON text, the exit "
                                "status and the error messages."));
  rp = ob_object_set(rp, "inputSchema", 11, schema);
  tools = ob_array_push(tools, rp);
  reply(m, id, ob_object_set(ob_object(), "tools", 5, tools));
}

static void cancelled(ob_mcp *m, const ob_value *params) {
  const ob_value *rid = params ? ob_object_get(params, "requestId", 9) : NULL;
  for (req *q = m->reqs; rid && q; q = q->next)
    if (!q->cancelled && ob_equal(q->id, rid)) {
      q->cancelled = 1;
      ob_drun_cancel(q->d);
      schedule_reap(m);
    }
}

/* One message (a line's, or a batch member), answered through reply: it is not
 * freed here. */
static void handle_message(ob_mcp *m, const ob_value *msg) {
  if (ob_typeof(msg) != OB_OBJECT) {
    reply_error(m, NULL, -32600, "Invalid Request: a JSON-RPC 2.0 object is expected");
    return;
  }
  const ob_value *id = ob_object_get(msg, "id", 2);
  const ob_value *method = ob_object_get(msg, "method", 6);
  const ob_value *jv = ob_object_get(msg, "jsonrpc", 7);
  /* an id is a string, a number or null; another is answered with id null */
  int bad_id = id && ob_typeof(id) != OB_STRING && !ob_is_number(id) && ob_typeof(id) != OB_NULL;
  const ob_value *answer_id = bad_id ? NULL : id;
  if (!jv || ob_typeof(jv) != OB_STRING || strcmp(ob_string_ptr(jv), "2.0")) {
    reply_error(m, answer_id, -32600, "Invalid Request: a JSON-RPC 2.0 object is expected");
    return;
  }
  if (!method && (ob_object_get(msg, "result", 6) || ob_object_get(msg, "error", 5)))
    return; /* a response to us: we send no requests */
  if (bad_id) {
    reply_error(m, NULL, -32600, "Invalid Request: id must be a string, a number or null");
  } else if (!method) {
    reply_error(m, id, -32600, "Invalid Request: method is missing");
  } else if (ob_typeof(method) != OB_STRING) {
    reply_error(m, id, -32600, "Invalid Request: method must be a string");
  } else {
    const char *mt = ob_string_ptr(method);
    const ob_value *params = ob_object_get(msg, "params", 6);
    if (params && ob_typeof(params) != OB_OBJECT)
      params = NULL;
    if (!id) { /* a notification: never answered */
      if (!strcmp(mt, "notifications/cancelled"))
        cancelled(m, params);
    } else if (!strcmp(mt, "initialize") && m->cur) {
      reply_error(m, id, -32600, "Invalid Request: initialize must not be part of a batch");
    } else if (!strcmp(mt, "initialize")) {
      initialize(m, id, params);
    } else if (!strcmp(mt, "ping")) {
      reply(m, id, ob_object());
    } else if (!strcmp(mt, "tools/list")) {
      tools_list(m, id);
    } else if (!strcmp(mt, "tools/call")) {
      tools_call(m, id, params);
    } else {
      ob_buf why;
      ob_buf_init(&why);
      ob_buf_addf(&why, "Method not found: %s", mt);
      ob_value *text = cut_text(&why, NAME_MAX_BYTES, "message");
      reply_error(m, id, -32601, ob_string_ptr(text));
      ob_unref(text);
    }
  }
}

/* The members of the JSON array that text (from its '[') begins with, counted at its
 * top level without parsing, up to max + 1: a guess when the text is not JSON (the
 * parser says so then), exact when it is. */
static size_t count_members(const char *text, size_t len, size_t max) {
  size_t n = 0, depth = 0;
  int in_string = 0, escaped = 0, empty = 1;
  for (size_t i = 0; i < len && n <= max; i++) {
    char ch = text[i];
    if (in_string) {
      if (escaped)
        escaped = 0;
      else if (ch == '\\')
        escaped = 1;
      else if (ch == '"')
        in_string = 0;
      continue;
    }
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n')
      continue;
    if (depth == 1 && empty && ch != ']')
      empty = 0;
    if (ch == '"') {
      in_string = 1;
    } else if (ch == '[' || ch == '{') {
      depth++;
    } else if (ch == ']' || ch == '}') {
      if (depth && --depth == 0)
        break;
    } else if (ch == ',' && depth == 1) {
      n++;
    }
  }
  return empty ? n : n + 1;
}

/* A line holding a JSON array: a batch (see the top of this file). */
static void handle_batch(ob_mcp *m, const ob_value *arr) {
  size_t n = ob_array_len(arr);
  char text[300];
  if (!n) {
    reply_error(m, NULL, -32600, "Invalid Request: an empty batch");
    return;
  }
  if (!m->version || strcmp(m->version, "2025-03-26")) {
    snprintf(text, sizeof text, "Invalid Request: a batch (a JSON array of messages) is taken only at "
             "protocol version 2025-03-26, %s%s%s; send each message on a line of its own",
             m->version ? "not at " : "and initialize has not agreed on one",
             m->version ? m->version : "", m->version ? " (this session's)" : "");
    reply_error(m, NULL, -32600, text);
    return;
  }
  batch *b = ob_xcalloc(1, sizeof *b);
  b->answers = ob_array();
  b->open = 1;
  m->cur = b;
  for (size_t i = 0; i < n; i++)
    handle_message(m, ob_array_get(arr, i));
  m->cur = NULL;
  b->open = 0;
  batch_settle(m, b);
}

void ob_mcp_handle(ob_mcp *m, const char *line, size_t len) {
  size_t k = 0;
  while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r'))
    k++;
  if (k == len)
    return; /* a blank line */
  size_t members = line[k] == '[' ? count_members(line + k, len - k, OB_MCP_MAX_BATCH) : 0;
  if (members > OB_MCP_MAX_BATCH) { /* refused before its values are built */
    char text[200];
    snprintf(text, sizeof text, "Invalid Request: a batch of more than %d messages", OB_MCP_MAX_BATCH);
    reply_error(m, NULL, -32600, text);
    return;
  }
  ob_error err;
  ob_value *msg = ob_json_parse(line, len, &err);
  if (!msg) {
    char text[600];
    snprintf(text, sizeof text, "Parse error: %s", err.msg);
    reply_error(m, NULL, -32700, text);
    return;
  }
  if (ob_typeof(msg) == OB_ARRAY)
    handle_batch(m, msg);
  else
    handle_message(m, msg);
  ob_unref(msg);
}

static void too_long(ob_mcp *m) {
  char text[200];
  snprintf(text, sizeof text, "Invalid Request: a line longer than %zu bytes (--max-line), ignored", m->max_line);
  reply_error(m, NULL, -32600, text);
  m->skipping = 1;
  ob_buf_free(&m->line);
  ob_buf_init(&m->line);
}

void ob_mcp_feed(ob_mcp *m, const char *data, size_t len) {
  while (len) {
    const char *nl = memchr(data, '\n', len);
    size_t n = nl ? (size_t)(nl - data) : len;
    if (m->skipping) {
      m->skipping = !nl;
    } else if (m->line.len + n > m->max_line) {
      too_long(m);
      m->skipping = !nl;
    } else if (!nl) {
      ob_buf_add(&m->line, data, n);
    } else if (!m->line.len) {
      ob_mcp_handle(m, data, n); /* a whole line in this read: not copied */
    } else {
      ob_buf_add(&m->line, data, n);
      ob_mcp_handle(m, m->line.data, m->line.len);
      m->line.len = 0;
    }
    if (!nl)
      return;
    data += n + 1;
    len -= n + 1;
  }
}

void ob_mcp_feed_end(ob_mcp *m) {
  if (m->line.len && !m->skipping) /* a last line without its newline */
    ob_mcp_handle(m, m->line.data, m->line.len);
  m->line.len = 0;
  m->skipping = 0;
}

void ob_mcp_set_max_line(ob_mcp *m, size_t max) { m->max_line = max ? max : OB_MCP_MAX_LINE; }

void ob_mcp_set_max_slice(ob_mcp *m, unsigned ms) { m->max_slice_ms = ms; }

ob_mcp *ob_mcp_new(ob_engine *e, ob_mcp_send_fn send, void *ud) {
  ob_mcp *m = ob_xcalloc(1, sizeof *m);
  m->e = e;
  m->send = send;
  m->ud = ud;
  ob_buf_init(&m->line);
  m->max_line = OB_MCP_MAX_LINE;
  /* no stall check: the server's own reading keeps the loop alive */
  m->dv = ob_drive_new(e, &(ob_drive_host){.flush = reap, .ud = m}, 0);
  return m;
}

size_t ob_mcp_pending(const ob_mcp *m) {
  size_t n = 0;
  for (const req *q = m->reqs; q; q = q->next)
    n++;
  return n;
}

const char *ob_mcp_version(const ob_mcp *m) { return m->version; }

void ob_mcp_free(ob_mcp *m) {
  if (!m)
    return;
  while (m->reqs) { /* nothing more is sent: the batches they wait in go too */
    req *q = m->reqs;
    m->reqs = q->next;
    batch *b = q->batch;
    req_free(q);
    if (b && !--b->waiting) {
      ob_unref(b->answers);
      free(b);
    }
  }
  ob_drive_free(m->dv);
  ob_buf_free(&m->line);
  free(m);
}
