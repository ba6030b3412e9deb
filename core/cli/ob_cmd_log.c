/* ob_cmd_log.c -- `obelus log JOURNAL [--at N]`: a run's journal as a readable
 * timeline, one line a message, or (--at N) its documents as of message N.
 *
 * The journal is read with ob_journal_load, so every message is understood
 * exactly as a run or `resolve` understands it (kind, instance, path, method,
 * value). A line is built as a row first and printed second, because the id
 * and tool columns are as wide as their widest entry. A delegated call's
 * messages (its "_log") are read into a log of their own and printed, by the
 * same code, indented under the call's line, numbered "3.0", "3.1", ... after
 * the position of the message that carries them. Times are relative to the
 * earliest _date anywhere in the journal, sub-logs included (a delegated
 * plan's messages are dated before the output that carries them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "log/ob_journal.h"
#include "base/ob_map.h"
#include "plan/ob_nulls.h"
#include "plan/ob_plan.h"
#include "host/ob_trace.h"

static const char log_help[] =
    "usage: obelus log JOURNAL [--at N]\n"
    "\n"
    "Prints a run's journal (the JSON Lines `obelus run --journal` writes, or a\n"
    "JSON array of messages) as a timeline, one line a message:\n"
    "\n"
    "  position  time  call id  tool  path written  [method]  value\n"
    "\n"
    "A plan message is a header line; an error message is marked \xE2\x9C\x97 (red on a\n"
    "terminal); a delegated call's own messages are indented under it, numbered\n"
    "3.0, 3.1, ... (64 levels deep at most; deeper ones are counted on one line).\n"
    "A value a call sent while it ran (obelus.emit) is a \"progress\" line after the\n"
    "message it followed in its run's lines (a delegated or _each run's indented),\n"
    "without a position. Times are seconds from the run's first start (from the\n"
    "first _date when the journal has no records).\n"
    "\n"
    "Then, from the journal's records, one line a call: its start and end, how\n"
    "long it took, its attempts when more than one, its state (done, failed,\n"
    "handled, skipped, never ran) and \"fire-and-forget\" for a call that writes\n"
    "nothing. The last line counts the messages.\n"
    "\n"
    "Values are cut to the terminal's width (60 characters when piped). Colours\n"
    "only on a terminal, and never when NO_COLOR is set.\n"
    "\n"
    "  --format trace   the Chrome Trace Event format instead (Perfetto, chrome://tracing):\n"
    "           an X event per call attempt, a process per instance, flow arrows from\n"
    "           each call to the calls that read its output\n"
    "  --format otlp    OpenTelemetry spans in OTLP/JSON: a trace per run, a span per call\n"
    "           attempt, delegated sub-plans' spans under their call's\n"
    "  --at N   print instead the documents as they were after the first N\n"
    "           messages, as JSON: {\"at\": N, \"documents\": {kind: document},\n"
    "           \"instances\": {instance: {kind: its view}}} (instances only when\n"
    "           the log has some)\n"
    "\n"
    "Lines that are records for `resume` (objects with a \"journal\" member) are\n"
    "not messages: skipped, and not counted by --at. A torn last line (the run\n"
    "was killed while writing it) is ignored, with a warning naming it.\n"
    "\n"
    "Exit 0; 2 when JOURNAL cannot be read or a line is malformed (its line is\n"
    "named), or on usage errors.\n"
    "\n"
    "examples:\n"
    "  obelus run plans/weather/plan.json --tools plans/weather/tools \\\n"
    "             --input '{\"city\":\"London\"}' --journal run.jsonl\n"
    "  obelus log run.jsonl\n"
    "  obelus log run.jsonl --at 3\n"
    "  obelus log run.jsonl | less -R\n";

/* What a call sent while it ran (a "progress" record: obelus.emit), printed after the
 * message it followed, in its run's lines (a delegated run's or an _each call's copies'
 * under their call, as their messages are). */
typedef struct progress {
  size_t after;   /* the number of messages of its run before it (SIZE_MAX: of an attempt
                     of a delegated run that began again, whose messages are not shown) */
  double ms;      /* when, in ms since the epoch (its record's t) */
  char *id, *data;
  char *scope;    /* its run's scope path ("sum", "#1/#0"), or NULL: the top-level run */
  int64_t attempt;
} progress;

/* How lines are printed: where, in colour or not, how wide. */
typedef struct view {
  FILE *out;
  int color;
  size_t width;   /* the terminal's columns, or 0 when not a terminal */
  int have_t0;
  double t0;      /* the earliest _date, in ms since the epoch */
  char t0_text[40];
  progress *prog; /* every run's, in the journal's order */
  size_t nprog;
} view;

#define SGR_DIM "2"
#define SGR_BOLD "1"
#define SGR_TOOL "36"
#define SGR_PATH "32"
#define SGR_NOTE "33"
#define SGR_ERROR "1;31"
#define SGR_HEAD "1;35"

static void sgr(const view *v, const char *code) {
  if (v->color)
    fprintf(v->out, "\033[%sm", code);
}

static void sgr_off(const view *v) {
  if (v->color)
    fputs("\033[0m", v->out);
}

/* --- text helpers --------------------------------------------------------------- */

/* Columns a UTF-8 string takes: one per code point (good enough for ids,
 * tools and JSON; wide CJK characters count as one). */
static size_t u8cols(const char *s) {
  size_t n = 0;
  for (; *s; s++)
    n += ((unsigned char)*s & 0xC0) != 0x80;
  return n;
}

static void pad(FILE *out, const char *s, size_t width) {
  fputs(s, out);
  for (size_t n = u8cols(s); n < width; n++)
    fputc(' ', out);
}

/* Appends s cut to at most max columns, the last one "…" when it was cut. */
static void add_cut(ob_buf *b, const char *s, size_t max) {
  size_t cols = u8cols(s);
  if (cols <= max) {
    ob_buf_add(b, s, strlen(s));
    return;
  }
  size_t keep = max ? max - 1 : 0, n = 0;
  const char *p = s;
  for (; *p; p++) {
    if (((unsigned char)*p & 0xC0) != 0x80 && n++ == keep)
      break;
  }
  ob_buf_add(b, s, (size_t)(p - s));
  if (max)
    ob_buf_add(b, "\xE2\x80\xA6", 3); /* … */
}

static char *buf_take(ob_buf *b) {
  char *s = b->data ? b->data : ob_xstrdup("");
  ob_buf_init(b);
  return s;
}

static const ob_value *field(const ob_value *o, const char *name) {
  return o && ob_typeof(o) == OB_OBJECT ? ob_object_get(o, name, strlen(name)) : NULL;
}

static const char *field_str(const ob_value *o, const char *name) {
  const ob_value *v = field(o, name);
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

/* "2026-11-22T00:14:03.915Z" (RFC 3339 UTC, any number of fraction digits)
 * -> ms since the epoch. 0 when it is not such a date. */
static int parse_date(const char *s, double *ms) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  int used = 0;
  if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &used) != 6 || !used)
    return 0;
  const char *p = s + used;
  double frac = 0, scale = 0.1;
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
      frac += (*p - '0') * scale;
  if (*p != 'Z' || p[1])
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t t = timegm(&tm);
  *ms = (double)t * 1000.0 + frac * 1000.0;
  return 1;
}

/* How deep delegated runs' messages are printed (and searched for the first _date). */
#define SUBLOG_DEPTH 64

/* Finds the earliest _date of the messages (an array), sub-logs included. */
static void find_t0(view *v, const ob_value *msgs, int depth) {
  for (size_t i = 0; depth < SUBLOG_DEPTH && i < ob_array_len(msgs); i++) {
    const ob_value *m = ob_array_get(msgs, i);
    const char *date = field_str(m, "_date");
    double ms;
    if (date && parse_date(date, &ms) && (!v->have_t0 || ms < v->t0)) {
      v->have_t0 = 1;
      v->t0 = ms;
      snprintf(v->t0_text, sizeof v->t0_text, "%s", date);
    }
    const ob_value *sub = field(m, "_log");
    if (sub && ob_typeof(sub) == OB_ARRAY)
      find_t0(v, sub, depth + 1);
  }
}

/* --- rows ------------------------------------------------------------------------ */

typedef enum { ROW_PLAN, ROW_WRITE, ROW_ERROR, ROW_BAD } row_type;

typedef struct row {
  row_type type;
  char *time;  /* "+0.011s", or "" when the message has no _date */
  char *id;    /* the call id, "@instance" for a context message in an instance, or "" */
  char *tool;
  char *what;  /* the path written (and method), the header, or the error's phase */
  char *value; /* compact JSON or the error's text, uncut; NULL for none */
  int handled; /* an error a || alternative received: an output, not a failure */
  ob_value *sublog; /* a delegated run's messages (a reference), or NULL */
} row;

typedef struct rows {
  size_t n;
  row *r;
} rows;

static void rows_free(rows *rs) {
  for (size_t i = 0; i < rs->n; i++) {
    row *r = &rs->r[i];
    free(r->time);
    free(r->id);
    free(r->tool);
    free(r->what);
    free(r->value);
    ob_unref(r->sublog);
  }
  free(rs->r);
}

static char *json_text(const ob_value *v) { return ob_json_print(v, OB_JSON_COMPACT, NULL); }

/* The tool a call (as written) names: _tool, or "delegate" for _delegate. */
static const char *tool_of(const ob_value *call) {
  const char *t = field_str(call, "_tool");
  return t ? t : field(call, "_delegate") ? "delegate" : "?";
}

/* The id the run gave the call an output message came from: its _id (with
 * "@instance" for an instance's copy), else the id of the first call of the
 * current plan written exactly like it in the same scope ("#3"), else "#?". */
static char *id_of(const ob_plan *plan, const ob_msg *m) {
  const char *id = field_str(m->call, "_id");
  const char *inst = m->instance ? ob_string_ptr(m->instance) : NULL;
  ob_buf b;
  ob_buf_init(&b);
  if (id) {
    ob_buf_addf(&b, "%s", id);
    if (inst && !field(m->call, "_instance"))
      ob_buf_addf(&b, "@%s", inst);
    return buf_take(&b);
  }
  for (size_t i = 0; plan && i < plan->ncalls; i++) {
    const ob_call *c = &plan->calls[i];
    if ((c->instance ? inst && !strcmp(c->instance, inst) : !inst) && ob_nulls_same_call(c->raw, m->call))
      return ob_xstrdup(c->id);
  }
  return ob_xstrdup("#?");
}

static void path_text(ob_buf *b, const ob_msg *m) {
  const char *p = m->path ? ob_string_ptr(m->path) : ""; /* a context message: the root */
  ob_buf_addf(b, OB_DAGGER "%s%s%s", ob_string_ptr(m->kind), *p && *p != '[' ? "." : "", p);
}

/* {"error": text, "tool": ..., "call": ...}: what a || alternative receives. */
static int is_routed_error(const ob_value *v) {
  return ob_typeof(v) == OB_OBJECT && ob_object_len(v) == 3 && field_str(v, "error") &&
         field(v, "tool") && field(v, "call");
}

static void plan_header(ob_buf *b, const ob_value *raw) {
  const char *file = field_str(raw, "file");
  const ob_value *plan = field(raw, "plan");
  const ob_value *calls = plan && ob_typeof(plan) == OB_ARRAY ? plan : field(plan, "plan");
  const ob_value *inst = field(plan, "instances");
  size_t n = calls && ob_typeof(calls) == OB_ARRAY ? ob_array_len(calls) : 0;
  ob_buf_addf(b, "plan %s \xC2\xB7 %zu call%s", file ? file : "(no file)", n, n == 1 ? "" : "s");
  if (inst && ob_typeof(inst) == OB_ARRAY) {
    ob_buf_addf(b, " \xC2\xB7 instances");
    for (size_t i = 0; i < ob_array_len(inst); i++) {
      const ob_value *x = ob_array_get(inst, i);
      if (ob_typeof(x) == OB_STRING)
        ob_buf_addf(b, "%s%s", i ? ", " : " ", ob_string_ptr(x));
    }
  } else if (inst && ob_typeof(inst) == OB_STRING) {
    ob_buf_addf(b, " \xC2\xB7 instances %s", ob_string_ptr(inst));
  }
}

static char *time_of(const view *v, const ob_value *raw) {
  const char *date = field_str(raw, "_date");
  double ms;
  char t[48] = "";
  if (date && v->have_t0 && parse_date(date, &ms))
    snprintf(t, sizeof t, "+%.3fs", (ms - v->t0) / 1000.0);
  else if (date)
    snprintf(t, sizeof t, "%s", date);
  return ob_xstrdup(t);
}

/* *s with terminal controls escaped, newlines too: a row is one line (ob_error.h). */
static void escape_field(char **s) {
  if (!*s)
    return;
  char *e = ob_escape_text(*s, strlen(*s), 0);
  free(*s);
  *s = e;
}

/* One row per message of log; plan messages replace the plan used to name calls. The
 * texts a plan, a tool or a journal controls are escaped (ob_escape_text). */
static void build_rows(const view *v, ob_log *log, rows *rs) {
  rs->n = ob_log_len(log);
  rs->r = calloc(rs->n ? rs->n : 1, sizeof *rs->r);
  if (!rs->r)
    abort();
  ob_plan *plan = NULL;
  ob_buf b;
  ob_buf_init(&b);
  for (size_t i = 0; i < rs->n; i++) {
    const ob_msg *m = ob_log_at(log, i);
    ob_value *raw = ob_log_message(log, i);
    row *r = &rs->r[i];
    r->time = time_of(v, raw);
    const ob_value *sub = field(raw, "_log");
    if (sub && ob_typeof(sub) == OB_ARRAY)
      r->sublog = ob_ref((ob_value *)sub);
    const ob_value *data = m->value;
    const char *kind = m->kind ? ob_string_ptr(m->kind) : "";
    if (m->type == OB_MSG_OTHER) {
      r->type = ROW_PLAN;
      r->id = ob_xstrdup("");
      r->tool = ob_xstrdup("");
      plan_header(&b, raw);
      r->what = buf_take(&b);
      const ob_value *pv = field(raw, "plan");
      const char *file = field_str(raw, "file");
      if (pv) {
        ob_plan_free(plan);
        plan = ob_plan_from_value(pv, file ? file : "plan");
      }
    } else if (m->type == OB_MSG_CONTEXT && !strcmp(kind, "error") && field_str(data, "error")) {
      /* an error message (plan-format §5), or a problem of a `loop` step's plan */
      r->type = ROW_ERROR;
      const char *id = field_str(data, "id");
      const ob_value *call = field(data, "call");
      const char *phase = field_str(data, "phase");
      r->id = ob_xstrdup(id ? id : "");
      r->tool = ob_xstrdup(call ? tool_of(call) : "");
      ob_buf_addf(&b, "\xE2\x9C\x97 failed%s (%s)",
                  field(data, "detached") ? " [fire-and-forget]" : "", phase ? phase : "?");
      const ob_value *step = field(data, "step");
      if (step && ob_typeof(step) == OB_INT)
        ob_buf_addf(&b, " at step %lld", (long long)ob_int_value(step));
      r->what = buf_take(&b);
      r->value = ob_xstrdup(field_str(data, "error"));
    } else {
      r->type = ROW_WRITE;
      if (m->type == OB_MSG_OUTPUT) {
        r->id = id_of(plan, m);
        r->tool = ob_xstrdup(tool_of(m->call));
      } else {
        if (m->instance)
          ob_buf_addf(&b, "@%s", ob_string_ptr(m->instance));
        r->id = buf_take(&b);
        r->tool = ob_xstrdup("");
      }
      path_text(&b, m);
      if (m->method != OB_METHOD_SET)
        ob_buf_addf(&b, " %s", ob_method_name(m->method));
      if (ob_msg_schema(m))
        ob_buf_addf(&b, " +schema");
      r->handled = m->type == OB_MSG_OUTPUT && is_routed_error(m->value);
      if (r->handled)
        ob_buf_addf(&b, " \xE2\x9A\xA0 handled error");
      r->what = buf_take(&b);
      r->value = json_text(m->value);
    }
    escape_field(&r->time);
    escape_field(&r->id);
    escape_field(&r->tool);
    escape_field(&r->what);
    escape_field(&r->value);
    ob_unref(raw);
  }
  ob_plan_free(plan);
  ob_buf_free(&b);
}

/* --- printing ------------------------------------------------------------------------ */

#define MAX_COL 24

static void print_log(const view *v, ob_log *log, const char *prefix, int depth,
                      const char *scope);

/* The messages of a delegated run, read into a log of their own and printed
 * under the line of the message that carried them. */
static void print_sublog(const view *v, const ob_value *msgs, const char *pos, int depth,
                         const char *scope) {
  ob_log *sub = ob_log_new();
  ob_log_keep_history(sub, 0); /* only printed, never read as of an earlier point */
  size_t bad = 0;
  ob_error err;
  char first[600] = "";
  for (size_t i = 0; i < ob_array_len(msgs); i++)
    if (ob_log_append(sub, ob_array_get(msgs, i), &err) < 0 && !bad++)
      snprintf(first, sizeof first, "_log[%zu]: %s", i, err.msg);
  ob_buf prefix;
  ob_buf_init(&prefix);
  ob_buf_addf(&prefix, "%s.", pos);
  print_log(v, sub, prefix.data, depth, scope);
  if (bad) {
    for (int d = 0; d < depth; d++)
      fputs("    ", v->out);
    sgr(v, SGR_ERROR);
    fprintf(v->out, "%s  %zu unreadable message%s in this delegated run (", prefix.data, bad,
            bad == 1 ? "" : "s");
    ob_fputs_escaped(v->out, first, strlen(first), 0);
    fputs(")\n", v->out);
    sgr_off(v);
  }
  ob_buf_free(&prefix);
  ob_log_free(sub);
}

/* A column of a line: text cut to MAX_COL, padded to width, in colour code, then the gap
 * (b is scratch). */
static void print_cell(const view *v, ob_buf *b, const char *text, size_t width,
                       const char *code) {
  b->len = 0;
  add_cut(b, text, MAX_COL);
  ob_buf_addc(b, '\0');
  sgr(v, code);
  pad(v->out, b->data, width);
  sgr_off(v);
  fputs("  ", v->out);
}

/* The progress records that came after the first `after` messages, each a line: no
 * position, the time, the call, "progress" (and its attempt after the first), the value. */
static void print_progress(const view *v, const char *scope, int depth, size_t after,
                           size_t wpos, size_t wtime, size_t wid, size_t wtool) {
  ob_buf b;
  ob_buf_init(&b);
  for (size_t k = 0; k < v->nprog; k++) {
    const progress *p = &v->prog[k];
    if (p->after != after || !p->scope != !scope || (scope && strcmp(scope, p->scope)))
      continue;
    for (int d = 0; d < depth; d++)
      fputs("    ", v->out);
    for (size_t n = 0; n < wpos + 2; n++)
      fputc(' ', v->out);
    b.len = 0;
    if (v->have_t0)
      ob_buf_addf(&b, "+%.3fs", (p->ms - v->t0) / 1000.0);
    ob_buf_addc(&b, '\0');
    sgr(v, SGR_DIM);
    pad(v->out, b.data, wtime);
    sgr_off(v);
    fputs("  ", v->out);
    print_cell(v, &b, p->id, wid, SGR_BOLD);
    print_cell(v, &b, "", wtool, SGR_TOOL);
    sgr(v, SGR_NOTE);
    if (p->attempt > 1)
      fprintf(v->out, "progress (attempt %lld)", (long long)p->attempt);
    else
      fputs("progress", v->out);
    sgr_off(v);
    size_t room = v->width ? (v->width > wpos + wtime + wid + wtool + 30
                                  ? v->width - (wpos + wtime + wid + wtool + 30) : 0) : 60;
    b.len = 0;
    add_cut(&b, p->data, room < 12 ? 12 : room);
    ob_buf_addc(&b, '\0');
    fprintf(v->out, "  %s\n", b.data);
  }
  ob_buf_free(&b);
}

/* A scoped "msg" line's scope number (its text begins {"journal":"msg","scope":N, as
 * every writer writes it), or 0; *plan set when the message is a plan message (its run
 * began again: a retried delegation). */
static uint64_t msg_line_scope(const char *s, size_t len, int *plan) {
  static const char head[] = "{\"journal\":\"msg\",\"scope\":";
  *plan = 0;
  if (len < sizeof head || memcmp(s, head, sizeof head - 1))
    return 0;
  uint64_t n = 0;
  size_t i = sizeof head - 1;
  for (; i < len && s[i] >= '0' && s[i] <= '9' && n < ((uint64_t)1 << 60); i++)
    n = n * 10 + (uint64_t)(s[i] - '0');
  static const char msg[] = ",\"msg\":{\"type\":\"plan\"";
  *plan = len - i >= sizeof msg - 1 && !memcmp(s + i, msg, sizeof msg - 1);
  return i < len && s[i] == ',' ? n : 0;
}

/* The progress records of the journal in file, each with its run's scope path and the
 * number of that run's messages before it (a record's line begins {"journal":, a
 * message's never does; a delegated run's messages are its scope's "msg" lines). */
static void read_progress(view *v, const char *file) {
  ob_buf text;
  ob_buf_init(&text);
  ob_error err;
  if (ob_read_file(file, &text, &err) != OB_OK || !text.len || text.data[0] == '[') {
    ob_buf_free(&text);
    return;
  }
  ob_map paths, counts; /* scope number -> its path (malloc'd); path -> messages so far */
  ob_map_init(&paths);
  ob_map_init(&counts);
  size_t nmsgs = 0, cap = 0;
  char key[24];
  const char *p = text.data, *end = text.data + text.len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    static const char head[] = "{\"journal\":";
    int plan;
    uint64_t sn;
    if (len < sizeof head - 1 || memcmp(p, head, sizeof head - 1)) {
      nmsgs += len > 0 && nl; /* a torn last line is no message */
    } else if (nl && (sn = msg_line_scope(p, len, &plan))) {
      snprintf(key, sizeof key, "%llu", (unsigned long long)sn);
      const char *path = ob_map_get(&paths, key, strlen(key));
      if (path) {
        uintptr_t n = plan ? 0 : (uintptr_t)ob_map_get(&counts, path, strlen(path));
        for (size_t k = 0; plan && k < v->nprog; k++) /* an earlier attempt's run */
          if (v->prog[k].scope && !strcmp(v->prog[k].scope, path))
            v->prog[k].after = SIZE_MAX;
        ob_map_put(&counts, path, strlen(path), (void *)(n + 1));
      }
    } else if (memmem(p, len, "\"scope\"", 7) || memmem(p, len, "\"progress\"", 10)) {
      ob_value *line = ob_json_parse(p, len, &err);
      ob_jrec rec;
      if (line && ob_jrec_parse(line, &rec, &err) == 1 && rec.kind == OB_JREC_SCOPE) {
        const char *in = NULL;
        if (rec.in) {
          snprintf(key, sizeof key, "%llu", (unsigned long long)rec.in);
          in = ob_map_get(&paths, key, strlen(key));
        }
        ob_buf path;
        ob_buf_init(&path);
        if (rec.in && in && rec.call)
          ob_buf_addf(&path, "%s/%s", in, rec.call);
        else if (rec.path)
          ob_buf_addf(&path, "%s", rec.path);
        snprintf(key, sizeof key, "%llu", (unsigned long long)rec.n);
        free(ob_map_get(&paths, key, strlen(key)));
        ob_map_put(&paths, key, strlen(key), path.data ? path.data : ob_xstrdup(""));
      } else if (line && rec.kind == OB_JREC_PROGRESS && rec.id && rec.data && !rec.step) {
        const char *path = NULL;
        if (rec.scope) {
          snprintf(key, sizeof key, "%llu", (unsigned long long)rec.scope);
          path = ob_map_get(&paths, key, strlen(key));
        } else if (rec.scope_path) {
          path = rec.scope_path;
        }
        if (!rec.scope || path) {
          if (v->nprog == cap) {
            cap = cap ? 2 * cap : 16;
            v->prog = ob_xrealloc(v->prog, cap * sizeof *v->prog);
          }
          progress *g = &v->prog[v->nprog++];
          g->after = path ? (size_t)(uintptr_t)ob_map_get(&counts, path, strlen(path)) : nmsgs;
          g->scope = path ? ob_xstrdup(path) : NULL;
          g->ms = (double)rec.t_us / 1000.0;
          g->attempt = rec.attempt;
          g->id = ob_xstrdup(rec.id);
          escape_field(&g->id);
          g->data = ob_json_print(rec.data, OB_JSON_COMPACT, NULL);
          escape_field(&g->data);
        }
      }
      ob_unref(line);
    }
    p = nl ? nl + 1 : end;
  }
  size_t it = 0;
  ob_map_entry *me;
  while (ob_map_next(&paths, &it, &me))
    free(me->val);
  ob_map_free(&paths);
  ob_map_free(&counts);
  ob_buf_free(&text);
}

static void print_log(const view *v, ob_log *log, const char *prefix, int depth,
                      const char *scope) {
  rows rs;
  build_rows(v, log, &rs);
  size_t wpos = 0, wtime = 0, wid = 0, wtool = 0;
  ob_buf pos;
  ob_buf_init(&pos);
  for (size_t i = 0; i < rs.n; i++) {
    const row *r = &rs.r[i];
    pos.len = 0;
    ob_buf_addf(&pos, "%s%zu", prefix, i);
    wpos = pos.len > wpos ? pos.len : wpos;
    wtime = u8cols(r->time) > wtime ? u8cols(r->time) : wtime;
    if (r->type != ROW_PLAN) {
      wid = u8cols(r->id) > wid ? u8cols(r->id) : wid;
      wtool = u8cols(r->tool) > wtool ? u8cols(r->tool) : wtool;
    }
  }
  wid = wid > MAX_COL ? MAX_COL : wid;
  wtool = wtool > MAX_COL ? MAX_COL : wtool;
  ob_buf b;
  ob_buf_init(&b);
  for (size_t i = 0; i < rs.n; i++) {
    const row *r = &rs.r[i];
    size_t cols = (size_t)depth * 4;
    for (int d = 0; d < depth; d++)
      fputs("    ", v->out);
    pos.len = 0;
    ob_buf_addf(&pos, "%s%zu", prefix, i);
    sgr(v, SGR_DIM);
    for (size_t n = pos.len; n < wpos; n++)
      fputc(' ', v->out);
    fprintf(v->out, "%s  ", pos.data);
    sgr_off(v);
    cols += wpos + 2;
    if (r->type == ROW_PLAN) {
      sgr(v, SGR_HEAD);
      fprintf(v->out, "\xE2\x94\x80\xE2\x94\x80 %s", r->what); /* ── */
      if (!depth && i == 0 && v->have_t0)
        fprintf(v->out, " \xC2\xB7 t0 %s", v->t0_text);
      sgr_off(v);
      fputc('\n', v->out);
      print_progress(v, scope, depth, i + 1, wpos, wtime, wid, wtool);
      continue;
    }
    sgr(v, SGR_DIM);
    pad(v->out, r->time, wtime);
    sgr_off(v);
    fputs("  ", v->out);
    cols += wtime + 2;
    print_cell(v, &b, r->id, wid, r->type == ROW_ERROR ? SGR_ERROR : SGR_BOLD);
    print_cell(v, &b, r->tool, wtool, SGR_TOOL);
    cols += wid + wtool + 4;
    sgr(v, r->type == ROW_ERROR ? SGR_ERROR : r->handled ? SGR_NOTE : SGR_PATH);
    fputs(r->what, v->out);
    sgr_off(v);
    cols += u8cols(r->what);
    if (r->value) {
      /* on a terminal the line ends at its edge; piped, values stay short */
      size_t room = v->width ? (v->width > cols + 3 ? v->width - cols - 3 : 0) : 60;
      room = room < 12 ? 12 : room;
      b.len = 0;
      add_cut(&b, r->value, room);
      ob_buf_addc(&b, '\0');
      fputs("  ", v->out);
      if (r->type == ROW_ERROR)
        sgr(v, SGR_ERROR);
      fputs(b.data, v->out);
      if (r->type == ROW_ERROR)
        sgr_off(v);
    }
    fputc('\n', v->out);
    print_progress(v, scope, depth, i + 1, wpos, wtime, wid, wtool);
    if (r->sublog && depth + 1 < SUBLOG_DEPTH) {
      ob_buf sub; /* its run's scope, as the journal's records name it */
      ob_buf_init(&sub);
      if (scope)
        ob_buf_addf(&sub, "%s/", scope);
      ob_buf_addf(&sub, "%s", r->id);
      print_sublog(v, r->sublog, pos.data, depth + 1, sub.data);
      ob_buf_free(&sub);
    } else if (r->sublog) { /* as find_t0: a chain of --max-depth 10000 needs no deeper stack */
      for (int d = 0; d <= depth; d++)
        fputs("    ", v->out);
      sgr(v, SGR_DIM);
      fprintf(v->out, "%s.  %zu message%s of a delegated run %d levels deep: not shown\n",
              pos.data, ob_array_len(r->sublog), ob_array_len(r->sublog) == 1 ? "" : "s",
              depth + 1);
      sgr_off(v);
    }
  }
  ob_buf_free(&pos);
  ob_buf_free(&b);
  rows_free(&rs);
}

/* The last line: how many of what, over how long. */
static void print_summary(const view *v, ob_log *log) {
  size_t outputs = 0, errors = 0;
  double last = 0;
  int dated = 0;
  for (size_t i = 0; i < ob_log_len(log); i++) {
    const ob_msg *m = ob_log_at(log, i);
    if (m->type == OB_MSG_OUTPUT)
      outputs++;
    else if (m->type == OB_MSG_CONTEXT && !strcmp(ob_string_ptr(m->kind), "error") &&
             field_str(m->value, "error"))
      errors++;
    ob_value *raw = ob_log_message(log, i);
    const char *date = field_str(raw, "_date");
    double ms;
    if (date && parse_date(date, &ms) && (!dated || ms > last)) {
      dated = 1;
      last = ms;
    }
    ob_unref(raw);
  }
  size_t n = ob_log_len(log);
  sgr(v, errors ? SGR_ERROR : SGR_DIM);
  fprintf(v->out, "%zu message%s \xC2\xB7 %zu output%s \xC2\xB7 %zu error%s", n, n == 1 ? "" : "s",
          outputs, outputs == 1 ? "" : "s", errors, errors == 1 ? "" : "s");
  if (dated && v->have_t0)
    fprintf(v->out, " \xC2\xB7 %.3fs", (last - v->t0) / 1000.0);
  sgr_off(v);
  fputc('\n', v->out);
}

/* --- the calls --------------------------------------------------------------------- */

/* A number of microseconds as seconds, to the millisecond ("1.234s"). */
static void add_secs(ob_buf *b, int64_t us) { ob_buf_addf(b, "%.3fs", (double)us / 1e6); }

/* After the timeline (before its last line), one line a call, from the journal's records (ob_trace's
 * OB_TRACE_RUN, whose times are microseconds from the run's first start): its id (under
 * the call whose run it is in: "scope › id"), tool, start and end, how long, how many
 * attempts when more than one, its state, and "fire-and-forget" for a call that writes
 * nothing (no _outputPath): what messages alone do not show. Nothing when the journal
 * has no records (a JSON array of messages). */
static void print_calls(const view *v, const ob_value *run) {
  const ob_value *calls = run ? ob_object_get(run, "calls", 5) : NULL;
  size_t n = calls && ob_typeof(calls) == OB_ARRAY ? ob_array_len(calls) : 0;
  if (!n)
    return;
  char **names = ob_xcalloc(n, sizeof *names), **tools = ob_xcalloc(n, sizeof *tools);
  size_t wid = 2, wtool = 4;
  for (size_t i = 0; i < n; i++) {
    const ob_value *c = ob_array_get(calls, i);
    const char *id = field_str(c, "id"), *scope = field_str(c, "scope"), *tool = field_str(c, "tool");
    ob_buf b;
    ob_buf_init(&b);
    if (scope && *scope)
      ob_buf_addf(&b, "%s \xE2\x80\xBA ", scope);
    ob_buf_addf(&b, "%s", id ? id : "?");
    names[i] = buf_take(&b);
    escape_field(&names[i]); /* a plan's text: its controls shown, never sent */
    tools[i] = ob_xstrdup(tool ? tool : "");
    escape_field(&tools[i]);
    size_t w = u8cols(names[i]);
    if (w > wid)
      wid = w;
    if (u8cols(tools[i]) > wtool)
      wtool = u8cols(tools[i]);
  }
  sgr(v, SGR_HEAD);
  fprintf(v->out, "calls, from the run's first start:");
  sgr_off(v);
  fputc('\n', v->out);
  ob_buf line;
  ob_buf_init(&line);
  for (size_t i = 0; i < n; i++) {
    const ob_value *c = ob_array_get(calls, i);
    const char *state = field_str(c, "state");
    const ob_value *at = ob_object_get(c, "attempts", 8), *params = ob_object_get(c, "params", 6);
    size_t na = at && ob_typeof(at) == OB_ARRAY ? ob_array_len(at) : 0;
    line.len = 0;
    if (na) {
      const ob_value *first = ob_array_get(at, 0), *last = ob_array_get(at, na - 1);
      int64_t start = ob_int_value(ob_array_get(first, 0));
      const ob_value *end = ob_array_get(last, 1);
      add_secs(&line, start);
      if (ob_typeof(end) == OB_INT) {
        ob_buf_add(&line, " \xE2\x86\x92 ", 5); /* → */
        add_secs(&line, ob_int_value(end));
        ob_buf_addf(&line, "  %.1f ms", (double)(ob_int_value(end) - start) / 1e3);
      } else {
        ob_buf_add(&line, " \xE2\x86\x92 ...", 7);
      }
      if (na > 1)
        ob_buf_addf(&line, "  %zu attempts", na);
    } else {
      ob_buf_addf(&line, "-");
    }
    fputs("  ", v->out);
    pad(v->out, names[i], wid);
    fputs("  ", v->out);
    sgr(v, SGR_TOOL);
    pad(v->out, tools[i], wtool);
    sgr_off(v);
    fprintf(v->out, "  %s  ", line.data);
    int bad = state && (!strcmp(state, "failed") || !strcmp(state, "handled"));
    sgr(v, bad ? SGR_ERROR : SGR_DIM);
    ob_fputs_escaped(v->out, state ? state : "?", strlen(state ? state : "?"), 0);
    sgr_off(v);
    if (params && ob_typeof(params) == OB_OBJECT && !ob_object_get(params, "_outputPath", 11) &&
        !ob_object_get(params, "_delegate", 9))
      fprintf(v->out, "  fire-and-forget");
    fputc('\n', v->out);
  }
  ob_buf_free(&line);
  for (size_t i = 0; i < n; i++) {
    free(names[i]);
    free(tools[i]);
  }
  free(names);
  free(tools);
}

/* The run's first start (its records' "t", microseconds) as the timeline's zero, when
 * it is before the first _date: messages are dated as they are written, after the
 * calls that wrote them ran, so the first one is not the run's start. */
static void start_at_first_call(view *v, const ob_value *run) {
  const ob_value *t0 = run ? ob_object_get(run, "t0_us", 5) : NULL;
  if (!t0 || ob_typeof(t0) != OB_INT || ob_int_value(t0) <= 0)
    return;
  double ms = (double)ob_int_value(t0) / 1000.0;
  if (!v->have_t0 || ms < v->t0) {
    v->have_t0 = 1;
    v->t0 = ms;
    time_t secs = (time_t)(ms / 1000.0);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t k = strftime(v->t0_text, sizeof v->t0_text, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(v->t0_text + k, sizeof v->t0_text - k, ".%03dZ", (int)((long long)ms % 1000));
  }
}

/* --- --at N ---------------------------------------------------------------------- */


/* --- the command ---------------------------------------------------------------- */

static size_t terminal_width(int fd) {
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  const char *c = getenv("COLUMNS");
  size_t n;
  return c && ob_cli_parse_count(c, &n) && n > 0 ? n : 80;
}

int ob_cmd_log(int argc, char **argv) {
  const char *file = NULL, *format = NULL;
  size_t at = OB_LOG_NOW;
  ob_cli_args args;
  ob_cli_args_start(&args, argc, argv);
  int more;
  while ((more = ob_cli_args_next(&args)) > 0) {
    const char *a = args.opt, *val = args.val;
    if (!a) {
      if (file)
        return ob_cli_usage_error("log", "unexpected argument \"%s\"", val);
      file = val;
    } else if (!strcmp(a, "--help")) {
      fputs(log_help, stdout);
      return OB_EXIT_OK;
    } else if (!strcmp(a, "--format")) {
      if (strcmp(val, "text") && strcmp(val, "trace") && strcmp(val, "otlp"))
        return ob_cli_usage_error("log", "--format is text, trace or otlp");
      format = val;
    } else if (!strcmp(a, "--at")) {
      if (!ob_cli_parse_count(val, &at))
        return ob_cli_usage_error("log", "--at needs a message count (0 or more)");
    } else if (!strcmp(a, "--queue")) {
      return ob_cli_usage_error("log", "--queue goes with --redis URL JOB");
    } else {
      return ob_cli_args_unhandled(&args);
    }
  }
  if (more < 0)
    return OB_EXIT_USAGE;
  if (!file)
    return ob_cli_usage_error("log", "needs a JOURNAL file");
  if (format && strcmp(format, "text")) {
    if (at != OB_LOG_NOW)
      return ob_cli_usage_error("log", "--at goes with the text timeline only");
    ob_error terr;
    ob_journal_info tinfo;
    ob_value *v = ob_trace_build(file, strcmp(format, "otlp") ? OB_TRACE_CHROME : OB_TRACE_OTLP,
                                 &tinfo, &terr);
    if (!v) {
      ob_eprintf("obelus log: %s\n", terr.msg);
      return OB_EXIT_USAGE;
    }
    ob_cli_report_torn("obelus log", file, &tinfo);
    char *text = ob_json_print(v, OB_JSON_COMPACT, NULL);
    puts(text);
    free(text);
    ob_unref(v);
    return OB_EXIT_OK;
  }

  ob_log *log = ob_log_new();
  ob_error err;
  ob_journal_info info;
  if (ob_journal_load(log, file, &info, &err) != OB_OK) {
    ob_eprintf("obelus log: %s\n", err.msg);
    ob_log_free(log);
    return OB_EXIT_USAGE;
  }
  ob_cli_report_torn("obelus log", file, &info);
  int rc = OB_EXIT_OK;
  if (at != OB_LOG_NOW) {
    if (at > ob_log_len(log)) {
      rc = ob_cli_usage_error("log", "--at %zu: %s holds %zu message%s", at, file,
                              ob_log_len(log), ob_log_len(log) == 1 ? "" : "s");
    } else {
      ob_value *docs = ob_log_documents(log, at);
      char *text = ob_json_print(docs, OB_JSON_PRETTY, NULL);
      puts(text);
      free(text);
      ob_unref(docs);
    }
  } else if (!ob_log_len(log)) {
    fprintf(stderr, "obelus log: %s holds no messages\n", file);
  } else {
    const char *nc = getenv("NO_COLOR");
    int tty = isatty(STDOUT_FILENO);
    view v = {stdout, tty && !(nc && *nc), tty ? terminal_width(STDOUT_FILENO) : 0, 0, 0, "", NULL, 0};
    ob_value *all = ob_array();
    for (size_t i = 0; i < ob_log_len(log); i++)
      all = ob_array_push(all, ob_log_message(log, i));
    find_t0(&v, all, 0);
    ob_unref(all);
    ob_error terr;
    ob_value *run = ob_trace_build(file, OB_TRACE_RUN, NULL, &terr); /* NULL: no records */
    start_at_first_call(&v, run);
    read_progress(&v, file);
    print_log(&v, log, "", 0, NULL);
    print_calls(&v, run);
    print_summary(&v, log);
    ob_unref(run);
    for (size_t k = 0; k < v.nprog; k++) {
      free(v.prog[k].id);
      free(v.prog[k].data);
      free(v.prog[k].scope);
    }
    free(v.prog);
  }
  ob_log_free(log);
  return rc;
}
