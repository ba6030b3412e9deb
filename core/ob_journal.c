/* ob_journal.c -- reading a log back from a file: a JSON array of messages, or a
 * journal of messages and records whose last line may be torn (the rules are in
 * ob_journal.h). Writing it is ob_wal's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ob_journal.h"

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
 * run writes has a "type", so a message written in SPEC 1's dataless shorthand
 * ({"type":"state","journal":"..."}) stays a message. */
static int is_record(const ob_value *v) {
  if (ob_typeof(v) != OB_OBJECT || ob_object_get(v, "type", 4))
    return 0;
  const ob_value *j = ob_object_get(v, "journal", 7);
  return j && ob_typeof(j) == OB_STRING;
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

static int read_lines(const char *path, const ob_buf *b, ob_journal_each each, void *ud,
                      ob_journal_info *info, ob_error *err) {
  const char *p = b->data, *end = b->data + ob_journal_len(b->data, b->len);
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
  for (size_t line = 1; p < end; line++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p)); /* always found: end follows a '\n' */
    if (!is_blank(p, nl)) {
      ob_error e;
      ob_value *v = ob_json_parse(p, (size_t)(nl - p), &e);
      if (!v) { /* each line is its own document: its "line 1, " says nothing */
        const char *why = strncmp(e.msg, "line 1, ", 8) ? e.msg : e.msg + 8;
        return ob_error_set(err, OB_EJSON, line, "%s:%zu: %s", path, line, why);
      }
      ob_journal_line l = {line, (uint64_t)(p - b->data), v, is_record(v)};
      if (l.is_record)
        info->records++;
      else
        info->messages++;
      int rc = each(ud, &l, err);
      ob_unref(v);
      if (rc != OB_OK)
        return rc;
    }
    p = nl + 1;
  }
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
    rc = read_lines(path, &b, each, ud, info, err);
  ob_buf_free(&b);
  return rc;
}

void ob_journal_subs_init(ob_journal_subs *s) { ob_map_init(&s->scopes); }

void ob_journal_subs_free(ob_journal_subs *s) {
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&s->scopes, &i, &me))
    ob_unref(me->val);
  ob_map_free(&s->scopes);
}

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
    const char *what = str_of(l->value, "journal"), *scope = str_of(l->value, "scope");
    const ob_value *m = ob_object_get(l->value, "msg", 3);
    if (what && scope && m && !strcmp(what, "msg"))
      ob_unref(ob_journal_subs_add(&ld->subs, scope, m));
    return OB_OK;
  }
  ob_value *m = ob_journal_subs_expand(&ld->subs, l->value);
  int rc = append_one(ld->log, m, ld->path, 1, l->line, err);
  ob_unref(m);
  return rc;
}

int ob_journal_load(ob_log *log, const char *path, ob_journal_info *info, ob_error *err) {
  ob_journal_info scratch;
  info = info ? info : &scratch;
  memset(info, 0, sizeof *info);
  ob_buf b;
  ob_buf_init(&b);
  int rc = ob_read_file(path, &b, err);
  if (rc == OB_OK) {
    size_t i = 0;
    b.len = ob_journal_len(b.data, b.len);
    while (i < b.len && strchr(" \t\r\n", b.data[i]))
      i++;
    loading ld = {log, path, {{0}}};
    ob_journal_subs_init(&ld.subs);
    rc = i < b.len && b.data[i] == '[' ? load_array(log, path, &b, info, err)
                                       : read_lines(path, &b, load_message, &ld, info, err);
    ob_journal_subs_free(&ld.subs);
  }
  ob_buf_free(&b);
  return rc;
}

void ob_journal_report_torn(FILE *out, const char *who, const char *path,
                            const ob_journal_info *info) {
  if (info->torn)
    fprintf(out, "%s: %s:%zu: the last line is torn (the process died while writing it); "
                 "ignored\n",
            who, path, info->torn_line);
}
