/* ob_fork.c -- a new run from any point of a journal, with changes (`obelus fork`).
 *
 * A fork is a resume of a journal made for it. The source journal is read once
 * and never written; the fork's journal holds, in order:
 *
 *   1. the plan message (the plan as it ran: a fork runs that plan, not the file);
 *   2. {"journal":"fork","source":F,"at":N} or {...,"from":I}: what it comes from;
 *   3. the source's lines, but for those of the calls that run again: the
 *      context and input messages, the "run" record, and each call that stays
 *      done with its records, its messages and its delegated or _each run's
 *      lines (and a forked source's changes, with their record; its "resume",
 *      "end" and first "fork" records go);
 *   4. the fork's own messages: each --set as an output message of a call
 *      {"_tool":"fork"} at that path (method set; a whole kind, "†state", as a
 *      data message), each --input as an input document; then
 *      {"journal":"fork","changes":K}, which says they are the fork's.
 *
 * `obelus resume` of it (ob_drive_resume.c) then rebuilds the log and runs every
 * call that has no settled record, which are exactly the calls that run again:
 *   - every call that had not completed (done) before the point: with --at N,
 *     whose settled record is not before the source's message N (the first
 *     not kept; so a call's messages are all kept or none); failed, skipped,
 *     in flight or never started ones, whatever the point;
 *   - with --from I, call I;
 *   - every call with a reference (its params', or its _each list) to a path a
 *     --set overlaps (plan-format §5's rule), or to kind input when there are --input;
 *   - and every call that depends on one of those, transitively (the plan's graph).
 * A call's messages are the top-level messages just before its settled record
 * (a call writes its outputs, or its error, and settles at once: nothing of
 * another call comes between); the messages of a run delegated from it, or of an
 * _each call's copies, are its scope's lines, the scope's first definition
 * naming the top-level call it belongs to. A call that runs again loses all of
 * them, and runs afresh (attempt 1, a new sub-run).
 *
 * Forks are top-level: --from names a call of the journal's plan (a copy or a
 * call of a delegated plan is refused, naming the call to fork from instead),
 * --at counts the top-level messages (as `log --at` does), and a journal of
 * `obelus loop` is refused. A fork of a fork is a fork like any: its source's
 * inherited lines and changes are that journal's lines.
 *
 * Costs: the source read whole and its lines copied as they are: only the plan
 * message and the records are parsed (messages, the bulk, are known by their first
 * bytes, as every writer writes them: {"type": and {"journal":"msg","scope":N,);
 * the plan read once (its graph); one pass to write. The fork then costs what a
 * resume of its journal costs (ob_resume.c parses every line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/ob_doc.h"
#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "base/ob_path.h"
#include "engine/ob_fork.h"
#include "log/ob_journal.h"
#include "log/ob_msg.h"
#include "plan/ob_plan.h"

#define NONE ((size_t)-1)

typedef struct fline {
  const char *text; /* the line as the source has it (in the reader's copy of the file) */
  size_t len;
  ob_value *v;      /* parsed: the plan message and records; NULL for the other lines */
  size_t msg;       /* a top-level message's index, else NONE */
  const char *owner; /* the top-level call whose line it is (borrowed), or NULL */
  int drop;         /* never written (an old "end", "resume" or first "fork" record) */
} fline;

typedef struct reader {
  const char *path;
  ob_buf file;      /* the source, whole */
  fline *l;
  size_t n, cap;
  size_t nmsg;      /* top-level messages */
  size_t prerun;    /* messages before the "run" record */
  int ran;
  size_t *pending, npending, cappending; /* top-level messages since the last record */
  ob_map owners;    /* scope number (decimal) -> owner id (borrowed from a line) */
  ob_map state;     /* call id -> settled record's line index + 1 (its last) */
} reader;

static void pending_to(reader *rd, const char *owner) {
  for (size_t i = 0; i < rd->npending; i++)
    rd->l[rd->pending[i]].owner = owner;
  rd->npending = 0;
}

static int loop_refused(const reader *rd, size_t line, ob_error *err) {
  return ob_error_set(err, OB_EINVAL, line, "%s:%zu: a journal of `obelus loop`: fork takes a "
                      "run's journal (`obelus run --journal`)", rd->path, line);
}

static int has_prefix(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && !memcmp(s, prefix, n);
}

/* A scoped "msg" line's scope number, read from its text (every writer puts "journal",
 * then "scope", first: ob_journal.h), or 0 when the line is not one in that form. Such
 * lines hold a delegated run's messages, the bulk of a journal: they are not parsed. */
static uint64_t msg_scope(const char *s, size_t len) {
  static const char head[] = "{\"journal\":\"msg\",\"scope\":";
  if (!has_prefix(s, len, head))
    return 0;
  uint64_t n = 0;
  size_t i = sizeof head - 1;
  for (; i < len && s[i] >= '0' && s[i] <= '9' && n < ((uint64_t)1 << 60); i++)
    n = n * 10 + (uint64_t)(s[i] - '0');
  return i < len && s[i] == ',' ? n : 0;
}

/* One line of the source (its number, for messages). Messages other than the plan
 * message are not parsed: a line beginning {"type": is one, as every writer makes it. */
static int take_line(reader *rd, const char *text, size_t len, size_t lineno, ob_error *err) {
  if (rd->n == rd->cap) {
    rd->cap = rd->cap ? 2 * rd->cap : 256;
    rd->l = ob_xrealloc(rd->l, rd->cap * sizeof *rd->l);
  }
  size_t at = rd->n++;
  fline *f = &rd->l[at];
  *f = (fline){text, len, NULL, NONE, NULL, 0};
  char key[24];
  uint64_t scope = msg_scope(text, len);
  if (scope) { /* a delegated run's message: its top-level call's */
    snprintf(key, sizeof key, "%llu", (unsigned long long)scope);
    f->owner = ob_map_get(&rd->owners, key, strlen(key));
    return OB_OK;
  }
  int record = 0;
  ob_jrec rec;
  if (at > 0 && has_prefix(text, len, "{\"type\":")) {
    record = 0;
  } else {
    ob_error e2;
    if (!(f->v = ob_json_parse(text, len, &e2)))
      return ob_error_set(err, OB_EINVAL, lineno, "%s:%zu: not JSON: %s", rd->path, lineno,
                          e2.msg);
    int k = ob_jrec_parse(f->v, &rec, &e2);
    if (k < 0)
      return ob_error_set(err, OB_EINVAL, lineno, "%s:%zu: %s", rd->path, lineno, e2.msg);
    record = k == 1;
  }
  if (!record) {
    f->msg = rd->nmsg++;
    if (rd->npending == rd->cappending) {
      rd->cappending = rd->cappending ? 2 * rd->cappending : 64;
      rd->pending = ob_xrealloc(rd->pending, rd->cappending * sizeof *rd->pending);
    }
    rd->pending[rd->npending++] = at;
    return OB_OK;
  }
  if (rec.step)
    return loop_refused(rd, lineno, err);
  if (rec.kind == OB_JREC_SCOPE) {
    const char *owner = NULL;
    if (rec.in) {
      snprintf(key, sizeof key, "%llu", (unsigned long long)rec.in);
      owner = ob_map_get(&rd->owners, key, strlen(key));
    } else if (rec.path) {
      if (!strncmp(rec.path, "step ", 5))
        return loop_refused(rd, lineno, err);
      owner = rec.path; /* a top-level call's run: its path is the call's id */
    }
    snprintf(key, sizeof key, "%llu", (unsigned long long)rec.n);
    ob_map_put(&rd->owners, key, strlen(key), (void *)owner);
    f->owner = owner;
    return OB_OK;
  }
  if (rec.scope || rec.scope_path) { /* a delegated run's line: its top-level call's */
    if (rec.scope) {
      snprintf(key, sizeof key, "%llu", (unsigned long long)rec.scope);
      f->owner = ob_map_get(&rd->owners, key, strlen(key));
    } else { /* a journal that named paths on its lines: the head is the owner (owner_call) */
      if (!strncmp(rec.scope_path, "step ", 5))
        return loop_refused(rd, lineno, err);
      f->owner = rec.scope_path;
    }
    return OB_OK;
  }
  switch (rec.kind) {
  case OB_JREC_RUN:
    if (rec.loop) /* `obelus loop`'s first run names its planner */
      return loop_refused(rd, lineno, err);
    rd->ran = 1;
    rd->prerun = rd->nmsg;
    pending_to(rd, NULL);
    break;
  case OB_JREC_START:
  case OB_JREC_RETRY:
  case OB_JREC_PROGRESS:
    f->owner = rec.id;
    pending_to(rd, NULL);
    break;
  case OB_JREC_SETTLED:
    if (!rec.id)
      return ob_error_set(err, OB_EINVAL, lineno, "%s:%zu: a settled record without an id",
                          rd->path, lineno);
    f->owner = rec.id;
    pending_to(rd, rec.id);
    ob_map_put(&rd->state, rec.id, strlen(rec.id), (void *)(uintptr_t)(at + 1));
    break;
  case OB_JREC_FORK: /* a fork's: its first record goes (this journal says where it comes
                        from), its changes stay with their messages */
    f->drop = !rec.has_changes;
    pending_to(rd, NULL);
    break;
  case OB_JREC_RESUME:
  case OB_JREC_END:
    f->drop = 1;
    pending_to(rd, NULL);
    break;
  default:
    pending_to(rd, NULL);
    break;
  }
  return OB_OK;
}

/* Reads the source: its complete lines (a torn last one and a tail of zeros are not
 * lines, as for every reader of journals), each taken in order. */
static int read_source(reader *rd, ob_error *err) {
  ob_buf_init(&rd->file);
  if (ob_read_regular_file(rd->path, &rd->file, err) != OB_OK)
    return err->code ? err->code : OB_EIO;
  const char *p = rd->file.data ? rd->file.data : "";
  const char *end = p + ob_journal_len(p, rd->file.len);
  size_t lineno = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
      break; /* torn: the process died while writing it */
    lineno++;
    size_t len = (size_t)(nl - p);
    const char *q = p;
    while (q < nl && (*q == ' ' || *q == '\t' || *q == '\r'))
      q++;
    if (q < nl) {
      int rc = take_line(rd, p, len, lineno, err);
      if (rc != OB_OK)
        return rc;
    }
    p = nl + 1;
  }
  return OB_OK;
}

static void reader_free(reader *rd) {
  for (size_t i = 0; i < rd->n; i++)
    ob_unref(rd->l[i].v);
  free(rd->l);
  ob_buf_free(&rd->file);
  free(rd->pending);
  ob_map_free(&rd->owners);
  ob_map_free(&rd->state);
}

/* The call of plan p a line's owner names (a path of "id/..." from an old journal: its
 * head, the longest id of the plan it begins with), or NULL. */
static const ob_call *owner_call(const ob_plan *p, const char *owner) {
  if (!owner)
    return NULL;
  const ob_call *c = ob_map_get(&p->ids, owner, strlen(owner));
  for (const char *s = owner; !c && (s = strchr(s, '/')); s++)
    c = ob_map_get(&p->ids, owner, (size_t)(s - owner));
  return c;
}

/* 1 when some part of c's references reads kind (any path when path is NULL) where
 * path overlaps. */
static int reads(const ob_call *c, const char *kind, const ob_path *path) {
  for (size_t r = 0; r < c->nrefs; r++)
    for (size_t a = 0; a < c->refs[r].expr.n; a++)
      for (size_t k = 0; k < c->refs[r].expr.alts[a].n; k++) {
        const ob_reference *x = &c->refs[r].expr.alts[a].refs[k];
        if (!strcmp(x->kind, kind) && (!path || ob_path_overlaps(&x->path, path)))
          return 1;
      }
  return 0;
}

ob_value *ob_fork_parse_set(const char *arg, ob_error *err) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg) {
    ob_error_set(err, OB_EINVAL, 0, "--set %s: give a reference and a JSON value, "
                 "'" OB_DAGGER "state.x=JSON'", arg);
    return NULL;
  }
  ob_expr e;
  ob_error e2;
  if (ob_expr_parse(arg, (size_t)(eq - arg), OB_EXPR_INPUT, &e, &e2) != OB_OK) {
    ob_error_set(err, OB_EINVAL, 0, "--set %s: %s", arg, e2.msg);
    return NULL;
  }
  int one = e.n == 1 && e.alts[0].n == 1;
  ob_expr_free(&e);
  if (!one) {
    ob_error_set(err, OB_EINVAL, 0, "--set %.*s: one reference, without || or &&", (int)(eq - arg),
                 arg);
    return NULL;
  }
  ob_value *v = ob_json_parse(eq + 1, strlen(eq + 1), &e2);
  if (!v) {
    ob_error_set(err, OB_EINVAL, 0, "--set %.*s: the value is not JSON: %s", (int)(eq - arg), arg,
                 e2.msg);
    return NULL;
  }
  ob_value *pair = ob_array();
  pair = ob_array_push(pair, ob_string(arg, (size_t)(eq - arg)));
  return ob_array_push(pair, v);
}

/* The fork's own call, as its messages name it. */
static ob_value *fork_call(void) {
  return ob_object_set(ob_object(), "_tool", 5, ob_cstring("fork"));
}

/* A --set as the message the fork writes (an output of its call at the path). */
static ob_value *set_message(const ob_reference *x, const ob_value *value) {
  ob_value *m = ob_object();
  m = ob_object_set(m, "type", 4, ob_cstring("data"));
  m = ob_object_set(m, "kind", 4, ob_cstring(x->kind));
  m = ob_object_set(m, "data", 4, ob_doc_nest(&x->path, value));
  if (!x->path.n) /* a whole document: a data message, as an input is (the log takes an
                     output message only with its path) */
    return m;
  ob_buf b;
  ob_buf_init(&b);
  ob_path_format(&b, &x->path);
  m = ob_object_set(m, "_path", 5, ob_string(b.data, b.len));
  ob_buf_free(&b);
  m = ob_object_set(m, "_outputMethod", 13, ob_cstring("set"));
  return ob_object_set(m, "_call", 5, fork_call());
}

static void write_line(ob_wal *w, const ob_value *v) { ob_wal_add_value(w, v); }

static void write_rec(ob_wal *w, const ob_jrec *r) {
  ob_jrec_write(ob_wal_line(w), r);
  ob_wal_line_ended(w);
}

int ob_fork_write(const ob_fork_options *o, ob_fork_result *res, ob_error *err) {
  *res = (ob_fork_result){0};
  if ((o->at < 0) == !o->from)
    return ob_error_set(err, OB_EINVAL, 0, "give the point to fork from: --at N or --from CALL_ID "
                                           "(one of them)");
  reader rd = {.path = o->source};
  ob_map_init(&rd.owners);
  ob_map_init(&rd.state);
  ob_plan *p = NULL;
  unsigned char *again = NULL;
  size_t *queue = NULL;
  ob_wal *w = NULL;
  size_t nsets = o->sets ? ob_array_len(o->sets) : 0, parsed = 0;
  ob_expr *sets = ob_xcalloc(nsets ? nsets : 1, sizeof *sets); /* each --set's reference */
  int rc;
  for (; parsed < nsets; parsed++) {
    const ob_value *ref = ob_array_get(ob_array_get(o->sets, parsed), 0);
    ob_error e2;
    if (ob_expr_parse(ob_string_ptr(ref), ob_string_len(ref), OB_EXPR_INPUT, &sets[parsed],
                      &e2) != OB_OK) {
      rc = ob_error_set(err, OB_EINVAL, 0, "--set %s: %s", ob_string_ptr(ref), e2.msg);
      goto done;
    }
  }
  rc = read_source(&rd, err);
  if (rc != OB_OK)
    goto done;
  const ob_value *pm = rd.n ? rd.l[0].v : NULL;
  const ob_value *pv = pm && ob_typeof(pm) == OB_OBJECT ? ob_object_get(pm, "plan", 4) : NULL;
  if (!pv || rd.l[0].msg != 0) {
    rc = ob_error_set(err, OB_EINVAL, 1, "%s: not a journal (its first line is not a plan "
                      "message)", o->source);
    goto done;
  }
  if (!rd.ran) {
    rc = ob_error_set(err, OB_EINVAL, 0, "%s: the run never began (no \"run\" record): "
                      "nothing to fork", o->source);
    goto done;
  }
  const ob_value *file = ob_object_get(pm, "file", 4);
  p = ob_plan_from_value(pv, file && ob_typeof(file) == OB_STRING ? ob_string_ptr(file) : "(plan)");
  if (p->nerrors) {
    rc = ob_error_set(err, OB_EINVAL, 1, "%s: its plan does not read: %s", o->source, p->errors[0]);
    goto done;
  }
  /* the point: the line of the first message not kept (--at), else none */
  size_t cut = rd.n;
  if (o->at >= 0) {
    if ((size_t)o->at > rd.nmsg) {
      rc = ob_error_set(err, OB_EINVAL, 0, "--at %lld: %s has %zu messages", o->at, o->source,
                        rd.nmsg);
      goto done;
    }
    if ((size_t)o->at < rd.prerun) {
      rc = ob_error_set(err, OB_EINVAL, 0, "--at %lld: the run had not begun (its first %zu "
                        "messages are the plan, its context and inputs): fork --at %zu or later",
                        o->at, rd.prerun, rd.prerun);
      goto done;
    }
    for (size_t i = 0; i < rd.n; i++)
      if (rd.l[i].msg == (size_t)o->at) {
        cut = i;
        break;
      }
  }
  again = ob_xcalloc(p->ncalls ? p->ncalls : 1, 1);
  for (size_t i = 0; i < p->ncalls; i++) {
    const char *id = p->calls[i].id;
    uintptr_t s = (uintptr_t)ob_map_get(&rd.state, id, strlen(id));
    const ob_value *st = s ? ob_object_get(rd.l[s - 1].v, "state", 5) : NULL;
    again[i] = !(st && ob_typeof(st) == OB_STRING && !strcmp(ob_string_ptr(st), "done") &&
                 s - 1 < cut);
  }
  if (o->from) {
    const ob_call *c = ob_map_get(&p->ids, o->from, strlen(o->from));
    if (!c) {
      rc = ob_error_set(err, OB_EINVAL, 0, "--from %s: the journal's plan has no call of that id "
                        "(a copy of an _each call, \"ID[i]\", or a call of a delegated plan "
                        "is forked from the call that made it)", o->from);
      goto done;
    }
    again[c - p->calls] = 1;
  }
  for (size_t s = 0; s < nsets; s++) {
    const ob_reference *x = &sets[s].alts[0].refs[0];
    for (size_t i = 0; i < p->ncalls; i++)
      if (reads(&p->calls[i], x->kind, &x->path))
        again[i] = 1;
  }
  for (size_t i = 0; o->inputs && ob_array_len(o->inputs) && i < p->ncalls; i++)
    if (reads(&p->calls[i], "input", NULL))
      again[i] = 1;
  /* and what follows from them */
  queue = ob_xmalloc((p->ncalls ? p->ncalls : 1) * sizeof *queue);
  size_t qh = 0, qt = 0;
  for (size_t i = 0; i < p->ncalls; i++)
    if (again[i])
      queue[qt++] = i;
  while (qh < qt) {
    const ob_call *c = &p->calls[queue[qh++]];
    for (size_t u = 0; u < c->nusers; u++)
      if (!again[c->users[u]]) {
        again[c->users[u]] = 1;
        queue[qt++] = c->users[u];
      }
  }
  /* the fork's journal: never the source (--overwrite would replace it) */
  struct stat src, dst;
  if (stat(o->source, &src) == 0 && stat(o->journal, &dst) == 0 && src.st_dev == dst.st_dev &&
      src.st_ino == dst.st_ino) {
    rc = ob_error_set(err, OB_EINVAL, 0, "--journal %s is the journal forked, which a fork "
                      "never writes: give the fork a journal of its own", o->journal);
    goto done;
  }
  if (!(w = ob_wal_open(NULL, o->journal, OB_WAL_CREATE | (o->overwrite ? OB_WAL_OVERWRITE : 0),
                        o->fsync, err))) {
    rc = err->code ? err->code : OB_EIO;
    goto done;
  }
  ob_wal_add(w, rd.l[0].text, rd.l[0].len);
  ob_jrec head = {.kind = OB_JREC_FORK, .source = o->source};
  if (o->at >= 0) {
    head.has_at = 1;
    head.at = o->at;
  } else {
    head.from = o->from;
  }
  write_rec(w, &head);
  for (size_t i = 1; i < rd.n; i++) {
    const fline *f = &rd.l[i];
    if (f->drop || i >= cut) /* past the point nothing is inherited */
      continue;
    if (f->owner) {
      const ob_call *c = owner_call(p, f->owner);
      if (c && again[c - p->calls])
        continue;
    }
    ob_wal_add(w, f->text, f->len); /* as the source has it */
    if (f->msg != NONE)
      res->inherited++;
  }
  size_t changes = 0;
  for (size_t s = 0; s < nsets; s++) {
    ob_value *m = set_message(&sets[s].alts[0].refs[0], ob_array_get(ob_array_get(o->sets, s), 1));
    write_line(w, m);
    ob_unref(m);
    changes++;
  }
  for (size_t i = 0; o->inputs && i < ob_array_len(o->inputs); i++) {
    ob_value *m = ob_msg_data(ob_cstring("input"), ob_ref(ob_array_get(o->inputs, i)), NULL);
    write_line(w, m);
    ob_unref(m);
    changes++;
  }
  write_rec(w, &(ob_jrec){.kind = OB_JREC_FORK, .has_changes = 1, .changes = (int64_t)changes});
  for (size_t i = 0; i < p->ncalls; i++) {
    if (again[i])
      res->rerun++;
    else
      res->kept++;
  }
  if (ob_wal_flush(w) != OB_OK) {
    rc = ob_error_set(err, OB_EIO, 0, "%s: %s", o->journal, ob_wal_error(w));
    goto done;
  }
done:
  if (w) {
    ob_error e3;
    if (ob_wal_close(w, &e3) != OB_OK && rc == OB_OK) {
      *err = e3;
      rc = e3.code;
    }
  }
  for (size_t s = 0; s < parsed; s++) /* the ones that parsed */
    ob_expr_free(&sets[s]);
  free(sets);
  free(queue);
  free(again);
  ob_plan_free(p);
  reader_free(&rd);
  return rc;
}
