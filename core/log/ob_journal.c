/* ob_journal.c -- the journal's records, written and read (ob_jrec_write,
 * ob_jrec_parse: the format is drawn in ob_journal.h), and reading a log back from a
 * file: a JSON array of messages, or a journal of messages and records whose last
 * line may be torn (the rules are in ob_journal.h). Putting lines in the file is
 * ob_wal's.
 *
 * Costs: writing a record prints straight into the caller's buffer (no value built,
 * no allocation beyond the buffer's growth); reading one is a few member lookups in
 * the parsed line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/ob_journal.h"

/* --- the vocabulary ------------------------------------------------------------ */

static const char *const jrec_names[] = {
    [OB_JREC_RUN] = "run",         [OB_JREC_STEP] = "step",   [OB_JREC_RESUME] = "resume",
    [OB_JREC_START] = "start",     [OB_JREC_RETRY] = "retry", [OB_JREC_SETTLED] = "settled",
    [OB_JREC_END] = "end",         [OB_JREC_SCOPE] = "scope", [OB_JREC_MSG] = "msg",
    [OB_JREC_PROGRESS] = "progress", [OB_JREC_FORK] = "fork",
};

const char *ob_jrec_name(ob_jrec_kind kind) {
  return kind > OB_JREC_NONE && kind < OB_JREC_OTHER ? jrec_names[kind] : "";
}

uint64_t ob_jrec_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A string literal, its length known when compiling. */
#define ADD_LIT(b, s) ob_buf_add((b), (s), sizeof(s) - 1)

static void add_int(ob_buf *b, int64_t n) {
  if (n < 0) {
    ob_buf_addc(b, '-');
    ob_buf_add_uint(b, (uint64_t)0 - (uint64_t)n);
  } else {
    ob_buf_add_uint(b, (uint64_t)n);
  }
}

static void add_str(ob_buf *b, const char *s) { ob_json_write_string(b, s, strlen(s)); }

/* {"journal":"<kind>" and the run's scope and step, when it has them */
static void jrec_head(ob_buf *b, const ob_jrec *r) {
  const char *name = ob_jrec_name(r->kind);
  ADD_LIT(b, "{\"journal\":\"");
  ob_buf_add(b, name, strlen(name));
  ob_buf_addc(b, '"');
  if (r->kind == OB_JREC_SCOPE)
    return;
  if (r->scope) {
    ADD_LIT(b, ",\"scope\":");
    ob_buf_add_uint(b, r->scope);
  }
  if (r->step) {
    ADD_LIT(b, ",\"step\":");
    add_int(b, r->step);
  }
}

void ob_jrec_write(ob_buf *b, const ob_jrec *r) {
  jrec_head(b, r);
  switch (r->kind) {
  case OB_JREC_RUN:
    if (r->tools) {
      ADD_LIT(b, ",\"tools\":");
      ob_json_write(b, r->tools, OB_JSON_COMPACT);
    }
    if (r->loop) {
      ADD_LIT(b, ",\"loop\":");
      ob_json_write(b, r->loop, OB_JSON_COMPACT);
    }
    break;
  case OB_JREC_STEP:
    if (r->problems) {
      ADD_LIT(b, ",\"problems\":");
      add_int(b, r->problems);
    }
    break;
  case OB_JREC_START:
  case OB_JREC_RETRY:
  case OB_JREC_SETTLED:
  case OB_JREC_PROGRESS:
    ADD_LIT(b, ",\"id\":");
    add_str(b, r->id);
    if (r->kind == OB_JREC_SETTLED) {
      ADD_LIT(b, ",\"state\":");
      add_str(b, r->state);
    } else {
      ADD_LIT(b, ",\"attempt\":");
      add_int(b, r->attempt);
    }
    if (r->kind == OB_JREC_RETRY) {
      ADD_LIT(b, ",\"error\":");
      add_str(b, r->error);
      ADD_LIT(b, ",\"delay_ms\":");
      ob_buf_add_uint(b, r->delay_ms);
    }
    if (r->kind == OB_JREC_PROGRESS) {
      ADD_LIT(b, ",\"data\":");
      ob_json_write(b, r->data, OB_JSON_COMPACT);
    }
    ADD_LIT(b, ",\"t\":");
    ob_buf_add_uint(b, r->t_us);
    break;
  case OB_JREC_END:
    ADD_LIT(b, ",\"exit\":");
    add_int(b, r->exit);
    if (r->output) {
      ADD_LIT(b, ",\"output\":");
      ob_json_write(b, r->output, OB_JSON_COMPACT);
    }
    break;
  case OB_JREC_FORK:
    if (r->source) {
      ADD_LIT(b, ",\"source\":");
      add_str(b, r->source);
    }
    if (r->has_at) {
      ADD_LIT(b, ",\"at\":");
      add_int(b, r->at);
    }
    if (r->from) {
      ADD_LIT(b, ",\"from\":");
      add_str(b, r->from);
    }
    if (r->has_changes) {
      ADD_LIT(b, ",\"changes\":");
      add_int(b, r->changes);
    }
    break;
  case OB_JREC_SCOPE:
    ADD_LIT(b, ",\"n\":");
    ob_buf_add_uint(b, r->n);
    if (r->in && r->call) {
      ADD_LIT(b, ",\"in\":");
      ob_buf_add_uint(b, r->in);
      ADD_LIT(b, ",\"call\":");
      add_str(b, r->call);
    } else {
      ADD_LIT(b, ",\"path\":");
      add_str(b, r->path);
    }
    break;
  case OB_JREC_MSG:
    ADD_LIT(b, ",\"msg\":");
    ob_json_write(b, r->msg, OB_JSON_COMPACT);
    break;
  default:
    break;
  }
  ADD_LIT(b, "}\n");
}

void ob_jrec_msg_open(ob_buf *b, const ob_jrec *r) {
  jrec_head(b, r);
  ADD_LIT(b, ",\"msg\":");
}

void ob_jrec_msg_close(ob_buf *b) { ADD_LIT(b, "}\n"); }

static const ob_value *member(const ob_value *o, const char *k, size_t len, ob_type type) {
  const ob_value *v = ob_object_get(o, k, len);
  return v && ob_typeof(v) == type ? v : NULL;
}

static const char *member_str(const ob_value *o, const char *k, size_t len) {
  const ob_value *v = member(o, k, len, OB_STRING);
  return v ? ob_string_ptr(v) : NULL;
}

/* A whole number from 1 (a scope's), else 0. */
static uint64_t member_no(const ob_value *o, const char *k, size_t len) {
  const ob_value *v = member(o, k, len, OB_INT);
  int64_t n = v ? ob_int_value(v) : 0;
  return n >= 1 ? (uint64_t)n : 0;
}

int ob_jrec_parse(const ob_value *line, ob_jrec *out, ob_error *err) {
  memset(out, 0, sizeof *out);
  if (ob_typeof(line) != OB_OBJECT || ob_object_get(line, "type", 4))
    return 0;
  const char *what = member_str(line, "journal", 7);
  if (!what)
    return 0;
  out->what = what;
  out->kind = OB_JREC_OTHER;
  for (int k = OB_JREC_RUN; k < OB_JREC_OTHER; k++)
    if (!strcmp(what, jrec_names[k]))
      out->kind = (ob_jrec_kind)k;
  const ob_value *v;
  out->scope = member_no(line, "scope", 5);
  out->scope_path = member_str(line, "scope", 5);
  if ((v = member(line, "step", 4, OB_INT)))
    out->step = ob_int_value(v);
  out->id = member_str(line, "id", 2);
  switch (out->kind) {
  case OB_JREC_RUN:
    out->tools = ob_object_get(line, "tools", 5);
    out->loop = ob_object_get(line, "loop", 4);
    break;
  case OB_JREC_STEP:
    if ((v = member(line, "problems", 8, OB_INT)))
      out->problems = ob_int_value(v);
    break;
  case OB_JREC_START:
  case OB_JREC_RETRY:
  case OB_JREC_SETTLED:
  case OB_JREC_PROGRESS:
    out->data = ob_object_get(line, "data", 4);
    if ((v = ob_object_get(line, "attempt", 7)) && ob_is_number(v)) {
      out->has_attempt = 1;
      out->attempt = ob_int_value(v);
    }
    out->state = member_str(line, "state", 5);
    out->error = member_str(line, "error", 5);
    if ((v = ob_object_get(line, "delay_ms", 8)) && ob_is_number(v) && ob_real_value(v) > 0)
      out->delay_ms = (uint64_t)ob_int_value(v);
    if ((v = ob_object_get(line, "t", 1)) && ob_is_number(v) && ob_real_value(v) > 0)
      out->t_us = (uint64_t)ob_int_value(v);
    break;
  case OB_JREC_END:
    if ((v = ob_object_get(line, "exit", 4)) && ob_is_number(v)) {
      out->has_exit = 1;
      out->exit = ob_int_value(v);
    }
    out->output = ob_object_get(line, "output", 6);
    break;
  case OB_JREC_SCOPE:
    out->n = member_no(line, "n", 1);
    out->in = member_no(line, "in", 2);
    v = ob_object_get(line, "call", 4);
    out->call = v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
    out->path = member_str(line, "path", 4);
    if (!(out->n && out->in && out->call) && !(out->n && !out->in && out->path))
      return ob_error_set(err, OB_EINVAL, 0, "a scope record needs \"n\" (a number from 1) "
                          "and \"in\" with \"call\", or \"path\"");
    break;
  case OB_JREC_MSG:
    out->msg = ob_object_get(line, "msg", 3);
    break;
  case OB_JREC_FORK:
    out->source = member_str(line, "source", 6);
    out->from = member_str(line, "from", 4);
    if ((v = member(line, "at", 2, OB_INT))) {
      out->has_at = 1;
      out->at = ob_int_value(v);
    }
    if ((v = member(line, "changes", 7, OB_INT))) {
      out->has_changes = 1;
      out->changes = ob_int_value(v);
    }
    break;
  default:
    break;
  }
  return 1;
}

/* Errors read "plan.json: [3]: ..." (array index) or "run.jsonl:4: ..." (line). */
static int append_one(ob_log *log, ob_value *msg, const char *path, int is_line, size_t n,
                      ob_error *err) {
  ob_error e;
  long rc = ob_log_append(log, msg, &e);
  if (rc < 0)
    return ob_error_set(err, (int)rc, n, is_line ? "%s:%zu: %s" : "%s: [%zu]: %s", path, n, e.msg);
  return OB_OK;
}

static int load_array(ob_log *log, const char *path, const ob_buf *b, ob_journal_info *info,
                      ob_error *err) {
  ob_error e;
  ob_value *all = ob_json_parse(b->data, b->len, &e);
  if (!all)
    return ob_error_set(err, OB_EJSON, e.pos, "%s: %s", path, e.msg);
  int rc = OB_OK;
  if (ob_typeof(all) != OB_ARRAY)
    rc = ob_error_set(err, OB_EINVAL, 0, "%s: expected a JSON array of messages", path);
  for (size_t i = 0; rc == OB_OK && i < ob_array_len(all); i++)
    if ((rc = append_one(log, ob_array_get(all, i), path, 0, i, err)) == OB_OK && info)
      info->messages++;
  ob_unref(all);
  return rc;
}

/* A record is an object with a string "journal" and no "type": every message a
 * run writes has a "type", so a message written in plan-format §1's dataless shorthand
 * ({"type":"state","journal":"..."}) stays a message (ob_jrec_parse). */
static int is_record(const ob_value *v) {
  ob_jrec r;
  return ob_jrec_parse(v, &r, NULL) != 0; /* a bad scope record is one too (taken before) */
}

static int is_blank(const char *p, const char *stop) {
  while (p < stop && (*p == ' ' || *p == '\t' || *p == '\r'))
    p++;
  return p == stop;
}

size_t ob_journal_len(const char *text, size_t len) {
  while (len && !text[len - 1])
    len--;
  return len;
}

static int read_lines(const char *path, const char *text, size_t len, ob_journal_each each,
                      void *ud, ob_journal_info *info, ob_error *err) {
  static const char none[] = "";
  const char *base = text ? text : none;
  const char *p = base, *end = base + ob_journal_len(base, len);
  if (end > p && end[-1] != '\n') { /* torn: known before any line is handed over */
    const char *last = end;
    while (last > p && last[-1] != '\n')
      last--;
    size_t line = 1;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(last - q))); q++)
      line++;
    info->torn = 1;
    info->torn_line = line;
    info->torn_offset = (uint64_t)(last - p);
    info->torn_bytes = (uint64_t)(end - last);
    end = last;
  }
  ob_journal_scopes scopes; /* numbers to paths (ob_journal_scopes_take) */
  ob_journal_scopes_init(&scopes);
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p)); /* always found: end follows a '\n' */
    if (!is_blank(p, nl)) {
      ob_error e;
      ob_value *v = ob_json_parse(p, (size_t)(nl - p), &e);
      if (!v) { /* each line is its own document: its "line 1, " says nothing */
        const char *why = strncmp(e.msg, "line 1, ", 8) ? e.msg : e.msg + 8;
        ob_journal_scopes_free(&scopes);
        return ob_error_set(err, OB_EJSON, line, "%s:%zu: %s", path, line, why);
      }
      int taken = ob_journal_scopes_take(&scopes, &v, path, line, err);
      if (taken < 0) {
        ob_unref(v);
        ob_journal_scopes_free(&scopes);
        return taken;
      }
      if (taken == 0) {
        ob_journal_line l = {line, (uint64_t)(p - base), v, is_record(v)};
        if (l.is_record)
          info->records++;
        else
          info->messages++;
        int rc = each(ud, &l, err);
        ob_unref(v);
        if (rc != OB_OK) {
          ob_journal_scopes_free(&scopes);
          return rc;
        }
      }
    }
    p = nl + 1;
  }
  ob_journal_scopes_free(&scopes);
  return OB_OK;
}

int ob_journal_read(const char *path, ob_journal_each each, void *ud, ob_journal_info *info,
                    ob_error *err) {
  ob_journal_info scratch;
  info = info ? info : &scratch;
  memset(info, 0, sizeof *info);
  ob_buf b;
  ob_buf_init(&b);
  int rc = ob_read_file(path, &b, err);
  if (rc == OB_OK)
    rc = read_lines(path, b.data, b.len, each, ud, info, err);
  ob_buf_free(&b);
  return rc;
}

int ob_journal_read_text(const char *name, const char *text, size_t len, ob_journal_each each,
                         void *ud, ob_journal_info *info, ob_error *err) {
  ob_journal_info scratch;
  info = info ? info : &scratch;
  memset(info, 0, sizeof *info);
  return read_lines(name, text, len, each, ud, info, err);
}

/* --- scopes by number --------------------------------------------------------- */

void ob_journal_scopes_init(ob_journal_scopes *s) { ob_map_init(&s->names); }

/* Frees a map whose values are ob_value references. */
static void free_values(ob_map *m) {
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(m, &i, &me))
    ob_unref(me->val);
  ob_map_free(m);
}

void ob_journal_scopes_free(ob_journal_scopes *s) { free_values(&s->names); }

/* A scope number as JSON gives it: a whole number from 1; 0 when v is not one. */
static uint64_t scope_no(const ob_value *v) {
  if (!v || ob_typeof(v) != OB_INT)
    return 0;
  int64_t n = ob_int_value(v);
  return n >= 1 ? (uint64_t)n : 0;
}

static ob_value *scope_path(const ob_journal_scopes *s, uint64_t n) {
  char key[24];
  int len = snprintf(key, sizeof key, "%llu", (unsigned long long)n);
  return ob_map_get(&s->names, key, (size_t)len);
}

/* In object o (taken over), member k's number replaced by its path; *bad set to the
 * number when it is not defined. */
static ob_value *with_path(const ob_journal_scopes *s, ob_value *o, const char *k,
                           uint64_t *bad) {
  const ob_value *v = ob_object_get(o, k, strlen(k));
  uint64_t n = scope_no(v);
  if (!n)
    return o;
  ob_value *p = scope_path(s, n);
  if (!p) {
    *bad = n;
    return o;
  }
  return ob_object_set(o, k, strlen(k), ob_ref(p));
}

/* A "_log" {"scope":N} of message m (taken over) made {"scope":PATH}. */
static ob_value *log_with_path(const ob_journal_scopes *s, ob_value *m, uint64_t *bad) {
  const ob_value *ref = ob_typeof(m) == OB_OBJECT ? ob_object_get(m, "_log", 4) : NULL;
  if (!ref || ob_typeof(ref) != OB_OBJECT || !scope_no(ob_object_get(ref, "scope", 5)))
    return m;
  ob_value *r = with_path(s, ob_ref((ob_value *)ref), "scope", bad);
  return ob_object_set(m, "_log", 4, r);
}

int ob_journal_scopes_take(ob_journal_scopes *s, ob_value **v, const char *path, size_t line,
                           ob_error *err) {
  ob_value *o = *v;
  ob_jrec rec;
  ob_error e;
  int is_rec = ob_jrec_parse(o, &rec, &e);
  if (is_rec < 0) {
    ob_error_set(err, is_rec, line, "%s:%zu: %s", path, line, e.msg);
    return is_rec;
  }
  if (rec.kind == OB_JREC_SCOPE) {
    uint64_t n = rec.n, in = rec.in;
    ob_value *name = NULL;
    if (in) {
      ob_value *parent = scope_path(s, in);
      if (!parent) {
        ob_error_set(err, OB_EINVAL, line, "%s:%zu: scope %llu is defined in scope %llu, "
                     "which no line before defines (a line deleted?)", path, line,
                     (unsigned long long)n, (unsigned long long)in);
        return OB_EINVAL;
      }
      const ob_value *call = ob_object_get(o, "call", 4);
      ob_buf b;
      ob_buf_init(&b);
      ob_buf_add(&b, ob_string_ptr(parent), ob_string_len(parent));
      ob_buf_addc(&b, '/');
      ob_buf_add(&b, ob_string_ptr(call), ob_string_len(call));
      name = ob_string(b.data, b.len);
      ob_buf_free(&b);
    } else {
      name = ob_ref(ob_object_get(o, "path", 4));
    }
    char key[24];
    int len = snprintf(key, sizeof key, "%llu", (unsigned long long)n);
    ob_unref(ob_map_put(&s->names, key, (size_t)len, name)); /* the last definition holds */
    ob_unref(o);
    *v = NULL;
    return 1;
  }
  if (ob_typeof(o) != OB_OBJECT)
    return 0;
  uint64_t bad = 0;
  if (is_rec) { /* a record: its scope, and a wrapped message's _log */
    o = with_path(s, o, "scope", &bad);
    const ob_value *m = ob_object_get(o, "msg", 3);
    if (m && ob_typeof(m) == OB_OBJECT && ob_object_get(m, "_log", 4))
      o = ob_object_set(o, "msg", 3, log_with_path(s, ob_ref((ob_value *)m), &bad));
  } else {
    o = log_with_path(s, o, &bad);
  }
  *v = o;
  if (bad) {
    ob_error_set(err, OB_EINVAL, line, "%s:%zu: scope %llu is not defined by a line before it "
                 "(a line deleted?)", path, line, (unsigned long long)bad);
    return OB_EINVAL;
  }
  return 0;
}

/* --- the messages of delegated runs -------------------------------------------- */

void ob_journal_subs_init(ob_journal_subs *s) { ob_map_init(&s->scopes); }

void ob_journal_subs_free(ob_journal_subs *s) { free_values(&s->scopes); }

static const char *str_of(const ob_value *o, const char *k) {
  const ob_value *v = ob_typeof(o) == OB_OBJECT ? ob_object_get(o, k, strlen(k)) : NULL;
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

ob_value *ob_journal_subs_expand(ob_journal_subs *s, const ob_value *msg) {
  const ob_value *ref = ob_typeof(msg) == OB_OBJECT ? ob_object_get(msg, "_log", 4) : NULL;
  const char *scope = ref ? str_of(ref, "scope") : NULL;
  if (!scope)
    return ob_ref((ob_value *)msg);
  ob_value *msgs = ob_map_get(&s->scopes, scope, strlen(scope));
  return ob_object_set(ob_ref((ob_value *)msg), "_log", 4, msgs ? ob_ref(msgs) : ob_array());
}

ob_value *ob_journal_subs_add(ob_journal_subs *s, const char *scope, const ob_value *msg) {
  ob_value *m = ob_journal_subs_expand(s, msg);
  const char *type = str_of(m, "type");
  ob_value *msgs = ob_map_get(&s->scopes, scope, strlen(scope));
  if (!msgs || (type && !strcmp(type, "plan"))) { /* its run begins (again) */
    ob_unref(msgs);
    msgs = ob_array();
  }
  ob_map_put(&s->scopes, scope, strlen(scope), ob_array_push(msgs, ob_ref(m)));
  return m;
}

typedef struct loading {
  ob_log *log;
  const char *path;
  ob_journal_subs subs;
} loading;

static int load_message(void *ud, const ob_journal_line *l, ob_error *err) {
  loading *ld = ud;
  if (l->is_record) {
    ob_jrec rec;
    if (ob_jrec_parse(l->value, &rec, NULL) > 0 && rec.kind == OB_JREC_MSG && rec.scope_path &&
        rec.msg)
      ob_unref(ob_journal_subs_add(&ld->subs, rec.scope_path, rec.msg));
    return OB_OK;
  }
  ob_value *m = ob_journal_subs_expand(&ld->subs, l->value);
  int rc = append_one(ld->log, m, ld->path, 1, l->line, err);
  ob_unref(m);
  return rc;
}

/* What ob_journal_load does once it has the file's bytes in b (their length cut to
 * the journal's: ob_journal_len). */
static int load_bytes(ob_log *log, const char *name, ob_buf *b, ob_journal_info *info,
                      ob_error *err) {
  size_t i = 0;
  b->len = ob_journal_len(b->data, b->len);
  while (i < b->len && strchr(" \t\r\n", b->data[i]))
    i++;
  loading ld = {log, name, {{0}}};
  ob_journal_subs_init(&ld.subs);
  int rc = i < b->len && b->data[i] == '['
               ? load_array(log, name, b, info, err)
               : read_lines(name, b->data, b->len, load_message, &ld, info, err);
  ob_journal_subs_free(&ld.subs);
  return rc;
}

int ob_journal_load(ob_log *log, const char *path, ob_journal_info *info, ob_error *err) {
  ob_journal_info scratch;
  info = info ? info : &scratch;
  memset(info, 0, sizeof *info);
  ob_buf b;
  ob_buf_init(&b);
  int rc = ob_read_file(path, &b, err);
  if (rc == OB_OK)
    rc = load_bytes(log, path, &b, info, err);
  ob_buf_free(&b);
  return rc;
}

int ob_journal_load_text(ob_log *log, const char *name, const char *text, size_t len,
                         ob_journal_info *info, ob_error *err) {
  ob_journal_info scratch;
  info = info ? info : &scratch;
  memset(info, 0, sizeof *info);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, text, len); /* (a copy: the loaders read a NUL-terminated buffer) */
  int rc = load_bytes(log, name, &b, info, err);
  ob_buf_free(&b);
  return rc;
}

void ob_journal_torn_text(ob_buf *b, const char *who, const char *path,
                          const ob_journal_info *info) {
  if (info->torn)
    ob_buf_addf(b, "%s: %s:%zu: the last line is torn (the process died while writing it); "
                   "ignored\n", who, path, info->torn_line);
}
