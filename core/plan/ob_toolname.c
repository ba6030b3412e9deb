/* ob_toolname.c -- tool names as LLM APIs take them, and back (ob_toolname.h, which
 * states the rule).
 *
 * Design: the names of a set are made in three passes over the tools sorted by real
 * name: names that fit the pattern keep themselves (they are taken first, so that no
 * other tool's name can be one of them); sanitized names that are unique, short enough
 * and not taken; then the rest get a hashed suffix, in order, each checked against
 * every name given so far. The result depends on the set only, never on the order the
 * tools were loaded in. A tool's name depends on the other tools' names only when
 * they collide: adding a tool never renames one whose name fits the pattern.
 *
 * Costs: as ob_toolname.h says; the sanitized names are counted in a hash map. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/ob_toolname.h"
#include "base/ob_error.h"
#include "base/ob_hash.h"
#include "base/ob_mem.h"

/* The sanitized name's characters kept before a hashed suffix: 55 + '_' + 8 = 64. */
#define KEEP (OB_TOOLNAME_MAX - 9)

static int fits(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-';
}

int ob_toolname_ok(const char *name, size_t len) {
  if (!len || len > OB_TOOLNAME_MAX)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (!fits((unsigned char)name[i]))
      return 0;
  return 1;
}

/* Each character that does not fit becomes '_': a UTF-8 sequence is one character (a
 * byte that starts none, one too). malloc'd, *out_len its length. */
static char *sanitize(const char *name, size_t len, size_t *out_len) {
  char *s = ob_xmalloc(len + 1);
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    unsigned char c = (unsigned char)name[i];
    if (fits(c)) {
      s[n++] = (char)c;
      i++;
      continue;
    }
    size_t seq = c < 0x80 ? 1 : ob_utf8_seq((const unsigned char *)name + i, len - i);
    s[n++] = '_';
    i += seq ? seq : 1;
  }
  s[n] = '\0';
  *out_len = n;
  return s;
}

/* The hashed form of round k: the sanitized name's first KEEP characters, '_', and the
 * low 32 bits of FNV-1a 64 of the real name (then '#' and k, for k >= 1) in hex. */
static char *hashed(const char *real, const char *san, size_t san_len, unsigned k) {
  uint64_t h = ob_fnv1a64(real, strlen(real));
  if (k) {
    char tail[16];
    int m = snprintf(tail, sizeof tail, "#%u", k);
    h = ob_fnv1a64_more(h, tail, (size_t)m);
  }
  size_t keep = san_len < KEEP ? san_len : KEEP;
  char *s = ob_xmalloc(keep + 10);
  memcpy(s, san, keep);
  snprintf(s + keep, 10, "_%08x", (unsigned)(h & 0xffffffffu));
  return s;
}

static int by_real(const void *a, const void *b) {
  const ob_map_entry *x = *(const ob_map_entry *const *)a, *y = *(const ob_map_entry *const *)b;
  return strcmp(x->key, y->key);
}

static void *index_val(size_t i) { return (void *)(uintptr_t)(i + 1); }

void ob_toolnames_init(ob_toolnames *tn, const ob_map *tools) {
  memset(tn, 0, sizeof *tn);
  ob_map_init(&tn->by_api);
  ob_map_init(&tn->by_real);
  size_t n = tools->n;
  ob_map_entry **es = ob_xmalloc((n + 1) * sizeof *es);
  ob_map_entry *me;
  size_t k = 0;
  for (size_t i = 0; ob_map_next(tools, &i, &me);)
    es[k++] = me;
  n = k;
  qsort(es, n, sizeof *es, by_real);
  tn->n = n;
  tn->real = ob_xcalloc(n + 1, sizeof *tn->real);
  tn->api = ob_xcalloc(n + 1, sizeof *tn->api);
  tn->val = ob_xcalloc(n + 1, sizeof *tn->val);
  for (size_t i = 0; i < n; i++) {
    tn->real[i] = es[i]->key;
    tn->val[i] = es[i]->val;
    ob_map_put(&tn->by_real, es[i]->key, es[i]->len, index_val(i));
  }
  free(es);
  /* 1: names that fit keep themselves */
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(tn->real[i]);
    if (ob_toolname_ok(tn->real[i], len)) {
      tn->api[i] = ob_xstrdup(tn->real[i]);
      ob_map_put(&tn->by_api, tn->api[i], len, index_val(i));
    }
  }
  /* 2: a sanitized name that is short enough, nobody else's, and not taken */
  char **san = ob_xcalloc(n + 1, sizeof *san);
  size_t *san_len = ob_xcalloc(n + 1, sizeof *san_len);
  ob_map count;
  ob_map_init(&count);
  for (size_t i = 0; i < n; i++) {
    if (tn->api[i])
      continue;
    san[i] = sanitize(tn->real[i], strlen(tn->real[i]), &san_len[i]);
    uintptr_t c = (uintptr_t)ob_map_get(&count, san[i], san_len[i]);
    ob_map_put(&count, san[i], san_len[i], (void *)(c + 1));
  }
  for (size_t i = 0; i < n; i++) {
    if (tn->api[i] || san_len[i] > OB_TOOLNAME_MAX ||
        (uintptr_t)ob_map_get(&count, san[i], san_len[i]) != 1 ||
        ob_map_get(&tn->by_api, san[i], san_len[i]))
      continue;
    tn->api[i] = san[i];
    san[i] = NULL;
    ob_map_put(&tn->by_api, tn->api[i], san_len[i], index_val(i));
  }
  ob_map_free(&count);
  /* 3: the rest, a hashed suffix, in order, the first round whose name is free */
  for (size_t i = 0; i < n; i++) {
    if (tn->api[i])
      continue;
    for (unsigned round = 0;; round++) {
      char *h = hashed(tn->real[i], san[i], san_len[i], round);
      if (!ob_map_get(&tn->by_api, h, strlen(h))) {
        tn->api[i] = h;
        ob_map_put(&tn->by_api, h, strlen(h), index_val(i));
        break;
      }
      free(h);
    }
  }
  for (size_t i = 0; i < n; i++)
    free(san[i]);
  free(san);
  free(san_len);
}

void ob_toolnames_free(ob_toolnames *tn) {
  for (size_t i = 0; i < tn->n; i++)
    free(tn->api[i]);
  free(tn->api);
  free(tn->real);
  free(tn->val);
  ob_map_free(&tn->by_api);
  ob_map_free(&tn->by_real);
  memset(tn, 0, sizeof *tn);
}

const char *ob_toolnames_api(const ob_toolnames *tn, const char *real) {
  uintptr_t i = (uintptr_t)ob_map_get(&tn->by_real, real, strlen(real));
  return i ? tn->api[i - 1] : NULL;
}

void *ob_toolnames_find(const ob_toolnames *tn, const char *name, size_t len) {
  uintptr_t i = (uintptr_t)ob_map_get(&tn->by_real, name, len);
  if (!i)
    i = (uintptr_t)ob_map_get(&tn->by_api, name, len);
  return i ? tn->val[i - 1] : NULL;
}

void ob_toolname_resolver_init(ob_toolname_resolver *r, const ob_map *tools) {
  r->tools = tools;
  r->made = 0;
}

void ob_toolname_resolver_free(ob_toolname_resolver *r) {
  if (r->made)
    ob_toolnames_free(&r->tn);
  r->made = 0;
}

void *ob_toolname_resolve(ob_toolname_resolver *r, const char *name, size_t len) {
  void *v = ob_map_get(r->tools, name, len);
  if (v)
    return v;
  if (!ob_toolname_ok(name, len))
    return NULL; /* every API name fits the pattern */
  if (!r->made) {
    ob_toolnames_init(&r->tn, r->tools);
    r->made = 1;
  }
  return ob_toolnames_find(&r->tn, name, len);
}
