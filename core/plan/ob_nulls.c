/* ob_nulls.c -- nulls written in a call, read as absent (ob_nulls.h states the rule).
 *
 * Design: the params are walked with their schema value side by side, keeping the
 * JSON pointer of the subschema reached, so that the question "does this property's
 * schema accept null?" is asked of the tool's compiled schema at that pointer
 * (ob_schema_validate_at): $refs, anyOf and every other keyword are judged exactly as
 * validation judges them. Only objects and arrays that hold a dropped null are
 * rebuilt; the rest of the call is shared.
 *
 * Costs: nothing for a tool whose schema describes no param; else a scan of the call
 * for a null (no allocation) first; only a call holding one is walked: O(size of its
 * params) plus one validation of null per null found. */
#include <stdlib.h>
#include <string.h>

#include "plan/ob_nulls.h"
#include "base/ob_buf.h"
#include "base/ob_mem.h"

/* The deepest the walk follows a schema (params nested deeper keep their nulls). */
#define MAX_WALK 64
/* $refs followed in a row before giving up (a cycle of refs to refs). */
#define MAX_HOPS 16

ob_value *ob_nulls_meta(const ob_value *raw) {
  if (ob_typeof(raw) != OB_OBJECT)
    return NULL;
  ob_object_iter it;
  ob_value *k, *v;
  int any = 0;
  ob_object_iter_init(&it, raw);
  while (!any && ob_object_iter_next(&it, &k, &v))
    any = ob_string_ptr(k)[0] == '_' && ob_typeof(v) == OB_NULL;
  if (!any)
    return NULL;
  ob_value *o = ob_object();
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &v))
    if (!(ob_string_ptr(k)[0] == '_' && ob_typeof(v) == OB_NULL))
      o = ob_object_setv(o, k, ob_ref(v));
  return o;
}

static int holds_null(const ob_value *v, int top, int depth) {
  if (depth > MAX_WALK)
    return 0;
  ob_object_iter it;
  ob_value *k, *x;
  switch (ob_typeof(v)) {
  case OB_NULL: return 1;
  case OB_OBJECT:
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x))
      if (!(top && ob_string_ptr(k)[0] == '_') && holds_null(x, 0, depth + 1))
        return 1;
    return 0;
  case OB_ARRAY:
    for (size_t i = 0; i < ob_array_len(v); i++)
      if (holds_null(ob_array_get(v, i), 0, depth + 1))
        return 1;
    return 0;
  default: return 0;
  }
}

/* Appends "/" and key, escaped as a JSON pointer's token. */
static void add_token(ob_buf *b, const char *key, size_t len) {
  ob_buf_addc(b, '/');
  for (size_t i = 0; i < len; i++) {
    if (key[i] == '~')
      ob_buf_add(b, "~0", 2);
    else if (key[i] == '/')
      ob_buf_add(b, "~1", 2);
    else
      ob_buf_addc(b, key[i]);
  }
}

/* sub with its local $refs ("#/...", without percent escapes) followed; ptr becomes
 * the pointer of the schema reached. NULL when a $ref leads elsewhere. */
static const ob_value *follow(const ob_value *root, const ob_value *sub, ob_buf *ptr) {
  for (int hops = 0; sub && ob_typeof(sub) == OB_OBJECT && hops < MAX_HOPS; hops++) {
    const ob_value *ref = ob_object_get(sub, "$ref", 4);
    if (!ref)
      return sub;
    const char *r = ob_typeof(ref) == OB_STRING ? ob_string_ptr(ref) : "";
    if (r[0] != '#' || (r[1] && r[1] != '/') || strchr(r, '%'))
      return NULL;
    ptr->len = 0;
    ob_buf_add(ptr, r + 1, strlen(r + 1)); /* NUL-terminated, also when empty */
    sub = ob_schema_ref_target(root, r);
  }
  return sub && ob_typeof(sub) == OB_OBJECT && !ob_object_get(sub, "$ref", 4) ? sub : NULL;
}

static int listed(const ob_value *req, const ob_value *key) {
  for (size_t i = 0; req && ob_typeof(req) == OB_ARRAY && i < ob_array_len(req); i++)
    if (ob_equal(ob_array_get(req, i), key))
      return 1;
  return 0;
}

typedef struct walk {
  const ob_schema *s;
  const ob_value *root;
  ob_buf ptr;
} walk;

static ob_value *drop(walk *w, const ob_value *sub, const ob_value *v, int top, int depth);

/* An object's params against sub's "properties". */
static ob_value *drop_object(walk *w, const ob_value *sub, const ob_value *v, int top, int depth) {
  const ob_value *props = ob_object_get(sub, "properties", 10);
  if (!props || ob_typeof(props) != OB_OBJECT)
    return NULL;
  const ob_value *req = ob_object_get(sub, "required", 8);
  size_t base = w->ptr.len;
  char *saved = ob_xstrndup(w->ptr.data ? w->ptr.data : "", base);
  ob_value *out = ob_object(), *k, *x;
  int changed = 0;
  ob_object_iter it;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &k, &x)) {
    const ob_value *ps = top && ob_string_ptr(k)[0] == '_'
                             ? NULL
                             : ob_object_get(props, ob_string_ptr(k), ob_string_len(k));
    ob_value *nx = NULL;
    int gone = 0;
    if (ps && (ob_typeof(x) == OB_NULL || ob_typeof(x) == OB_OBJECT || ob_typeof(x) == OB_ARRAY)) {
      w->ptr.len = 0;
      ob_buf_add(&w->ptr, saved, base);
      ob_buf_add(&w->ptr, "/properties", 11);
      add_token(&w->ptr, ob_string_ptr(k), ob_string_len(k));
      ob_buf_add(&w->ptr, "", 0);
      if (ob_typeof(x) == OB_NULL)
        gone = !listed(req, k) && ob_schema_validate_at(w->s, w->ptr.data, x, NULL) == 0;
      else
        nx = drop(w, ps, x, 0, depth + 1);
    }
    changed |= gone || nx;
    if (!gone)
      out = ob_object_setv(out, k, nx ? nx : ob_ref(x));
  }
  free(saved);
  if (!changed) {
    ob_unref(out);
    return NULL;
  }
  return out;
}

/* An array's elements against sub's "items" (a schema; a list of them is not
 * followed). */
static ob_value *drop_array(walk *w, const ob_value *sub, const ob_value *v, int depth) {
  const ob_value *items = ob_object_get(sub, "items", 5);
  if (!items || ob_typeof(items) != OB_OBJECT)
    return NULL;
  size_t base = w->ptr.len;
  char *saved = ob_xstrndup(w->ptr.data ? w->ptr.data : "", base);
  ob_value *out = NULL;
  for (size_t i = 0; i < ob_array_len(v); i++) {
    const ob_value *x = ob_array_get(v, i);
    if (ob_typeof(x) != OB_OBJECT && ob_typeof(x) != OB_ARRAY)
      continue;
    w->ptr.len = 0;
    ob_buf_add(&w->ptr, saved, base);
    ob_buf_add(&w->ptr, "/items", 6);
    ob_buf_add(&w->ptr, "", 0);
    ob_value *nx = drop(w, items, x, 0, depth + 1);
    if (nx)
      out = ob_array_set(out ? out : ob_ref((ob_value *)v), i, nx);
  }
  free(saved);
  return out;
}

static ob_value *drop(walk *w, const ob_value *sub, const ob_value *v, int top, int depth) {
  if (depth > MAX_WALK || !(sub = follow(w->root, sub, &w->ptr)))
    return NULL;
  if (ob_typeof(v) == OB_OBJECT)
    return drop_object(w, sub, v, top, depth);
  if (ob_typeof(v) == OB_ARRAY)
    return drop_array(w, sub, v, depth);
  return NULL;
}

ob_value *ob_nulls_params(const ob_tool *t, const ob_value *raw) {
  if (!t->schema || ob_typeof(t->schema_value) != OB_OBJECT || ob_typeof(raw) != OB_OBJECT ||
      (!ob_object_get(t->schema_value, "properties", 10) &&
       !ob_object_get(t->schema_value, "$ref", 4)) || /* no param is described */
      !holds_null(raw, 1, 0))
    return NULL;
  walk w = {t->schema, t->schema_value, {0}};
  ob_buf_init(&w.ptr);
  ob_buf_add(&w.ptr, "", 0);
  ob_value *out = drop(&w, t->schema_value, raw, 1, 0);
  ob_buf_free(&w.ptr);
  return out;
}

int ob_nulls_same_call(const ob_value *written, const ob_value *ran) {
  if (ob_typeof(written) != ob_typeof(ran))
    return 0;
  if (ob_typeof(written) == OB_ARRAY) {
    if (ob_array_len(written) != ob_array_len(ran))
      return 0;
    for (size_t i = 0; i < ob_array_len(written); i++)
      if (!ob_nulls_same_call(ob_array_get(written, i), ob_array_get(ran, i)))
        return 0;
    return 1;
  }
  if (ob_typeof(written) != OB_OBJECT)
    return ob_equal(written, ran);
  if (ob_equal(written, ran))
    return 1;
  size_t matched = 0;
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, written);
  while (ob_object_iter_next(&it, &k, &v)) {
    const ob_value *r = ob_object_get(ran, ob_string_ptr(k), ob_string_len(k));
    if (!r) {
      if (ob_typeof(v) != OB_NULL)
        return 0;
      continue;
    }
    if (!ob_nulls_same_call(v, r))
      return 0;
    matched++;
  }
  return matched == ob_object_len(ran);
}
