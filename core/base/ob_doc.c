/* ob_doc.c -- reading and writing a value at a path inside a document, with the
 * output methods of plan-format §4.
 *
 * Writes are path copies: ob_doc_write rebuilds only the containers along the
 * path (each an O(log32 width) persistent update) and shares everything else
 * with the old document, which stays valid: the log keeps every version. */
#include <string.h>

#include "base/ob_doc.h"

static const char *const method_names[] = {"set", "merge", "assign", "push", "concat"};

int ob_method_parse(const char *s, size_t len) {
  for (int m = 0; m < (int)(sizeof method_names / sizeof *method_names); m++)
    if (strlen(method_names[m]) == len && memcmp(method_names[m], s, len) == 0)
      return m;
  return -1;
}

const char *ob_method_name(ob_method m) { return method_names[m]; }

static ob_value *child(const ob_value *c, const ob_seg *s) {
  if (ob_typeof(c) == OB_OBJECT)
    return ob_object_get_h(c, s->key, s->keylen, ob_seg_hash(s));
  if (ob_typeof(c) == OB_ARRAY && s->index >= 0 && (uint64_t)s->index < ob_array_len(c))
    return ob_array_get(c, (size_t)s->index);
  return NULL;
}

ob_value *ob_doc_get(const ob_value *doc, const ob_path *p, size_t n) {
  const ob_value *v = doc;
  for (size_t i = 0; v && i < n; i++)
    v = child(v, &p->segs[i]);
  return (ob_value *)v;
}

/* Takes the value at key out of an owned object, leaving null in its place
 * (the key keeps its position): the child is then ours alone when nothing
 * else shares it, so it can be changed in place. */
static ob_value *detach(ob_value **o, const char *key, size_t len) {
  ob_value *child = ob_object_get(*o, key, len);
  if (child) {
    ob_ref(child);
    *o = ob_object_set(*o, key, len, ob_null());
  }
  return child;
}

/* Deep merge, consuming base (NULL = absent). */
static ob_value *merge_take(ob_value *base, const ob_value *over) {
  if (!base || ob_typeof(base) != OB_OBJECT || ob_typeof(over) != OB_OBJECT) {
    ob_unref(base);
    return ob_ref((ob_value *)over);
  }
  ob_value *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, over);
  while (ob_object_iter_next(&it, &k, &v)) {
    ob_value *old = detach(&base, ob_string_ptr(k), ob_string_len(k));
    base = ob_object_setv(base, k, merge_take(old, v));
  }
  return base;
}

ob_value *ob_doc_merge(const ob_value *base, const ob_value *over) {
  return merge_take(ob_ref((ob_value *)base), over);
}

/* Applies method to *slot (owned, NULL = absent): on success *slot is the
 * result; on error nothing was changed (every check comes first). */
static int apply_take(ob_method method, ob_value **slot, const ob_value *value, ob_error *err) {
  ob_value *old = *slot;
  switch (method) {
  case OB_METHOD_SET:
    *slot = ob_ref((ob_value *)value);
    ob_unref(old);
    return OB_OK;
  case OB_METHOD_MERGE: *slot = merge_take(old, value); return OB_OK;
  case OB_METHOD_ASSIGN: {
    if (ob_typeof(value) != OB_OBJECT)
      return ob_error_set(err, OB_EWRITE, 0, "assign needs an object value, got %s",
                          ob_type_name(ob_typeof(value)));
    if (old && ob_typeof(old) != OB_OBJECT)
      return ob_error_set(err, OB_EWRITE, 0, "assign onto %s, not an object",
                          ob_type_name(ob_typeof(old)));
    ob_value *r = old ? old : ob_object(), *k, *v;
    ob_object_iter it;
    ob_object_iter_init(&it, value);
    while (ob_object_iter_next(&it, &k, &v))
      r = ob_object_setv(r, k, ob_ref(v));
    *slot = r;
    return OB_OK;
  }
  case OB_METHOD_PUSH:
  case OB_METHOD_CONCAT: {
    const char *name = method_names[method];
    if (old && ob_typeof(old) != OB_ARRAY)
      return ob_error_set(err, OB_EWRITE, 0, "%s onto %s, not an array", name,
                          ob_type_name(ob_typeof(old)));
    if (method == OB_METHOD_CONCAT && ob_typeof(value) != OB_ARRAY)
      return ob_error_set(err, OB_EWRITE, 0, "concat needs an array value, got %s",
                          ob_type_name(ob_typeof(value)));
    ob_value *r = old ? old : ob_array();
    if (method == OB_METHOD_PUSH)
      r = ob_array_push(r, ob_ref((ob_value *)value));
    else
      for (size_t i = 0, n = ob_array_len(value); i < n; i++)
        r = ob_array_push(r, ob_ref(ob_array_get(value, i)));
    *slot = r;
    return OB_OK;
  }
  }
  return ob_error_set(err, OB_EWRITE, 0, "unknown output method");
}

ob_value *ob_doc_apply(ob_method method, const ob_value *old, const ob_value *value,
                       ob_error *err) {
  ob_value *r = ob_ref((ob_value *)old);
  if (apply_take(method, &r, value, err) != OB_OK) {
    ob_unref(r);
    return NULL;
  }
  return r;
}

/* Says where a write failed: the path up to and including segment i. */
static void fail_at(ob_error *err, const ob_path *p, size_t i, const char *what, const char *type) {
  ob_path prefix = {i + 1, p->segs};
  ob_buf b;
  ob_buf_init(&b);
  ob_path_format(&b, &prefix);
  ob_error_set(err, OB_EWRITE, 0, "%s%s at \"%s\"", what, type, b.data ? b.data : "");
  ob_buf_free(&b);
}

/* Writes at the segments of p from i on, inside *node (owned; NULL = absent).
 * On error *node is as it was: the path is checked on the way down, and only
 * changed on the way back up. Unshared containers change in place. */
static int write_take(ob_value **node, const ob_path *p, size_t i, ob_method method,
                      const ob_value *value, ob_error *err) {
  if (i == p->n)
    return apply_take(method, node, value, err);
  const ob_seg *s = &p->segs[i];
  ob_value *cur = *node ? *node : ob_object(); /* missing intermediates are objects */
  switch (ob_typeof(cur)) {
  case OB_OBJECT: {
    /* one lookup; then the child is written where it lies (cur ours and small),
     * or taken out (null left in its place) and put back by position */
    uint32_t hash = ob_seg_hash(s);
    long at = ob_object_index_h(cur, s->key, s->keylen, hash);
    ob_value **slot = at >= 0 ? ob_object_slot(cur, (size_t)at) : NULL;
    if (slot) {
      int rc = write_take(slot, p, i + 1, method, value, err);
      ob_object_slot_done(cur, (size_t)at);
      return rc;
    }
    ob_value *child = NULL, *k;
    if (at >= 0) {
      ob_object_at(cur, (size_t)at, &k, &child);
      ob_ref(child);
      cur = ob_object_set_at(cur, (size_t)at, ob_null());
    }
    int rc = write_take(&child, p, i + 1, method, value, err);
    if (at >= 0) /* the new child, or (on error) the old one */
      cur = ob_object_set_at(cur, (size_t)at, child);
    else if (rc == OB_OK)
      cur = ob_object_add_h(cur, s->key, s->keylen, hash, child);
    else if (!*node)
      cur = NULL; /* an absent document stays absent */
    *node = cur;
    return rc;
  }
  case OB_ARRAY: {
    size_t len = ob_array_len(cur);
    if (s->index < 0) {
      fail_at(err, p, i, "a key that is not an array index, on an array", "");
      return OB_EWRITE;
    }
    if ((uint64_t)s->index > len) {
      ob_error e2;
      ob_error_set(&e2, 0, 0, " (the array has %zu elements)", len);
      fail_at(err, p, i, "an index past the end of the array", e2.msg);
      return OB_EWRITE;
    }
    size_t at = (size_t)s->index;
    ob_value *child = NULL;
    if (at < len) {
      child = ob_ref(ob_array_get(cur, at));
      cur = ob_array_set(cur, at, ob_null());
    }
    int rc = write_take(&child, p, i + 1, method, value, err);
    if (at < len)
      cur = ob_array_set(cur, at, child);
    else if (rc == OB_OK)
      cur = ob_array_push(cur, child);
    *node = cur;
    return rc;
  }
  default:
    fail_at(err, p, i, "cannot write through ", ob_type_name(ob_typeof(cur)));
    return OB_EWRITE;
  }
}

/* A written value deeper than this would make the document too deep: refused
 * before anything changes (a bound: the path's length plus the value's depth). */
static int too_deep(const ob_path *p, ob_method method, const ob_value *value, ob_error *err) {
  size_t depth = p->n + ob_depth(value) + (method == OB_METHOD_PUSH || method == OB_METHOD_CONCAT);
  if (depth <= OB_MAX_DEPTH)
    return 0;
  ob_error_set(err, OB_EDEPTH, 0, "the document would be nested deeper than %d levels",
               OB_MAX_DEPTH);
  return 1;
}

int ob_doc_write_take(ob_value **doc, const ob_path *p, size_t from, ob_method method,
                      const ob_value *value, ob_error *err) {
  if (too_deep(p, method, value, err))
    return OB_EDEPTH;
  return write_take(doc, p, from, method, value, err);
}

ob_value *ob_doc_write(const ob_value *doc, const ob_path *p, ob_method method,
                       const ob_value *value, ob_error *err) {
  return ob_doc_write_from(doc, p, 0, method, value, err);
}

ob_value *ob_doc_write_from(const ob_value *doc, const ob_path *p, size_t from, ob_method method,
                            const ob_value *value, ob_error *err) {
  ob_value *r = ob_ref((ob_value *)doc);
  if (ob_doc_write_take(&r, p, from, method, value, err) != OB_OK) {
    ob_unref(r);
    return NULL;
  }
  return r;
}

ob_value *ob_doc_nest(const ob_path *p, const ob_value *value) {
  ob_value *v = ob_ref((ob_value *)value);
  for (size_t i = p->n; i-- > 0;)
    v = ob_object_set(ob_object(), p->segs[i].key, p->segs[i].keylen, v);
  return v;
}
