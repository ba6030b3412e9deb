/* ob_doc.c -- reading and writing a value at a path inside a document, with the
 * output methods of SPEC 4.
 *
 * Writes are path copies: ob_doc_write rebuilds only the containers along the
 * path (each an O(log32 width) persistent update) and shares everything else
 * with the old document, which stays valid: the log keeps every version. */
#include <string.h>

#include "ob_doc.h"

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
    return ob_object_get(c, s->key, s->keylen);
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

ob_value *ob_doc_merge(const ob_value *base, const ob_value *over) {
  if (!base || ob_typeof(base) != OB_OBJECT || ob_typeof(over) != OB_OBJECT)
    return ob_ref((ob_value *)over);
  ob_value *r = ob_ref((ob_value *)base), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, over);
  while (ob_object_iter_next(&it, &k, &v)) {
    ob_value *old = ob_object_get(base, ob_string_ptr(k), ob_string_len(k));
    r = ob_object_setv(r, k, ob_doc_merge(old, v));
  }
  return r;
}

ob_value *ob_doc_apply(ob_method method, const ob_value *old, const ob_value *value,
                       ob_error *err) {
  switch (method) {
  case OB_METHOD_SET: return ob_ref((ob_value *)value);
  case OB_METHOD_MERGE: return ob_doc_merge(old, value);
  case OB_METHOD_ASSIGN: {
    if (ob_typeof(value) != OB_OBJECT) {
      ob_error_set(err, OB_EWRITE, 0, "assign needs an object value, got %s",
                   ob_type_name(ob_typeof(value)));
      return NULL;
    }
    if (old && ob_typeof(old) != OB_OBJECT) {
      ob_error_set(err, OB_EWRITE, 0, "assign onto %s, not an object", ob_type_name(ob_typeof(old)));
      return NULL;
    }
    ob_value *r = ob_ref(old ? (ob_value *)old : ob_object()), *k, *v;
    ob_object_iter it;
    ob_object_iter_init(&it, value);
    while (ob_object_iter_next(&it, &k, &v))
      r = ob_object_setv(r, k, ob_ref(v));
    return r;
  }
  case OB_METHOD_PUSH:
  case OB_METHOD_CONCAT: {
    const char *name = method_names[method];
    if (old && ob_typeof(old) != OB_ARRAY) {
      ob_error_set(err, OB_EWRITE, 0, "%s onto %s, not an array", name, ob_type_name(ob_typeof(old)));
      return NULL;
    }
    if (method == OB_METHOD_CONCAT && ob_typeof(value) != OB_ARRAY) {
      ob_error_set(err, OB_EWRITE, 0, "concat needs an array value, got %s",
                   ob_type_name(ob_typeof(value)));
      return NULL;
    }
    ob_value *r = ob_ref(old ? (ob_value *)old : ob_array());
    if (method == OB_METHOD_PUSH)
      return ob_array_push(r, ob_ref((ob_value *)value));
    for (size_t i = 0, n = ob_array_len(value); i < n; i++)
      r = ob_array_push(r, ob_ref(ob_array_get(value, i)));
    return r;
  }
  }
  ob_error_set(err, OB_EWRITE, 0, "unknown output method");
  return NULL;
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

static ob_value *write_at(const ob_value *node, const ob_path *p, size_t i, ob_method method,
                          const ob_value *value, ob_error *err) {
  if (i == p->n)
    return ob_doc_apply(method, node, value, err);
  const ob_seg *s = &p->segs[i];
  if (!node)
    node = ob_object(); /* missing intermediates are created as objects */
  switch (ob_typeof(node)) {
  case OB_OBJECT: {
    ob_value *c = write_at(ob_object_get(node, s->key, s->keylen), p, i + 1, method, value, err);
    return c ? ob_object_set(ob_ref((ob_value *)node), s->key, s->keylen, c) : NULL;
  }
  case OB_ARRAY: {
    size_t len = ob_array_len(node);
    if (s->index < 0) {
      fail_at(err, p, i, "a key that is not an array index, on an array", "");
      return NULL;
    }
    if ((uint64_t)s->index > len) {
      ob_error e2;
      ob_error_set(&e2, 0, 0, " (the array has %zu elements)", len);
      fail_at(err, p, i, "an index past the end of the array", e2.msg);
      return NULL;
    }
    size_t at = (size_t)s->index;
    ob_value *c = write_at(at < len ? ob_array_get(node, at) : NULL, p, i + 1, method, value, err);
    if (!c)
      return NULL;
    ob_value *r = ob_ref((ob_value *)node);
    return at < len ? ob_array_set(r, at, c) : ob_array_push(r, c);
  }
  default:
    fail_at(err, p, i, "cannot write through ", ob_type_name(ob_typeof(node)));
    return NULL;
  }
}

ob_value *ob_doc_write(const ob_value *doc, const ob_path *p, ob_method method,
                       const ob_value *value, ob_error *err) {
  return ob_doc_write_from(doc, p, 0, method, value, err);
}

ob_value *ob_doc_write_from(const ob_value *doc, const ob_path *p, size_t from, ob_method method,
                            const ob_value *value, ob_error *err) {
  ob_value *r = write_at(doc, p, from, method, value, err);
  if (r && ob_depth(r) > OB_MAX_DEPTH) {
    ob_unref(r);
    ob_error_set(err, OB_EDEPTH, 0, "the document would be nested deeper than %d levels",
                 OB_MAX_DEPTH);
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
