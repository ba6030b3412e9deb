/* ob_suggest.c -- "did you mean": the known name nearest a misspelt one.
 *
 * The distance is the optimal string alignment distance (Levenshtein's insertions,
 * deletions and changes, plus a swap of two neighbours, the commonest slip: "shema",
 * "requird", "citeis"), on bytes, computed row by row in two rows and a third for the
 * swap, and cut short once a whole row is past the bound asked for. A name is offered
 * only when it is near enough for the word's length: one slip in a short word, two in
 * a longer one, a third of a long one; so "runn" gets "run" but "x" gets nothing.
 *
 * Costs: O(len(a) * len(b)) time, O(len(b)) memory per pair (on the stack up to 64
 * bytes a name, else allocated); a suggestion, one pair per known name. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "base/ob_suggest.h"

static size_t min3(size_t a, size_t b, size_t c) {
  size_t m = a < b ? a : b;
  return m < c ? m : c;
}

size_t ob_suggest_distance(const char *a, const char *b, size_t max) {
  size_t la = strlen(a), lb = strlen(b);
  if ((la > lb ? la - lb : lb - la) > max)
    return max + 1;
  size_t stack[3][65];
  size_t *heap = NULL, *r0, *r1, *r2; /* two rows back, one back, this one */
  if (lb < 65) {
    r0 = stack[0], r1 = stack[1], r2 = stack[2];
  } else {
    heap = ob_xmalloc(3 * (lb + 1) * sizeof *heap);
    r0 = heap, r1 = heap + lb + 1, r2 = heap + 2 * (lb + 1);
  }
  for (size_t j = 0; j <= lb; j++)
    r1[j] = j;
  size_t d = lb;
  for (size_t i = 1; i <= la; i++) {
    r2[0] = i;
    size_t row_min = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      size_t v = min3(r1[j] + 1, r2[j - 1] + 1, r1[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && r0[j - 2] + 1 < v)
        v = r0[j - 2] + 1; /* two neighbours swapped */
      r2[j] = v;
      if (v < row_min)
        row_min = v;
    }
    if (row_min > max) { /* every way on is past the bound */
      free(heap);
      return max + 1;
    }
    size_t *t = r0;
    r0 = r1, r1 = r2, r2 = t;
  }
  d = r1[lb];
  free(heap);
  return d;
}

/* How far a name may be from word to be offered. */
static size_t near_enough(const char *word) {
  size_t n = strlen(word);
  return n <= 4 ? 1 : n <= 8 ? 2 : n / 3;
}

void ob_suggester_init(ob_suggester *s, const char *word) {
  s->word = word;
  s->best = NULL;
  s->dist = near_enough(word) + 1;
}

void ob_suggester_add(ob_suggester *s, const char *name) {
  if (!name || !strcmp(name, s->word))
    return;
  size_t d = ob_suggest_distance(s->word, name, s->dist - 1);
  if (d < s->dist) {
    s->best = name;
    s->dist = d;
  }
}

const char *ob_suggester_best(const ob_suggester *s) { return s->best; }

const char *ob_suggest(const char *word, const char *const *names, size_t n) {
  ob_suggester s;
  ob_suggester_init(&s, word);
  for (size_t i = 0; i < n; i++)
    ob_suggester_add(&s, names[i]);
  return ob_suggester_best(&s);
}
