/* ob_queue_ids.c -- a set of job ids, small whatever its size (ob_queue_ids.h).
 *
 * Job ids are numbers ("1", "2", ... from the queue's INCRBY), and a batch's are
 * consecutive, so the numbers are kept as runs: sorted, each run its first number
 * and the index of that number in the set (16 bytes a run; a run's length is where
 * the next one's indexes begin). A batch of a million is one run; a million ids
 * with nothing consecutive is a million runs, 16 MB. The other ids (a part "7.2",
 * or a name written by hand) are texts in one buffer, sorted, an offset each:
 * they are few.
 *
 * While ids are added, numbers that follow each other (a file of ids in the order
 * submit printed them) extend the run under way at no cost; a number alone costs 8
 * bytes (a vector, sorted at the seal), a run or a range 16; the seal turns them
 * into runs and frees the rest.
 *
 * Costs: adding O(1) amortised; the seal O(n log n) over the numbers added one by
 * one; a look-up a binary search over the runs (or the texts); getting an id by
 * its index the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "fleet/ob_queue_ids.h"

typedef struct run {
  uint64_t first; /* its first number */
  uint64_t base;  /* the index of that number */
} run;

typedef struct span {
  uint64_t first, last;
} span;

struct ob_queue_ids {
  /* while adding: the run of consecutive numbers under way, the numbers that were
     alone, the spans */
  int in_run;
  uint64_t run_first, run_last;
  uint64_t *nums;
  size_t nnums, capnums;
  span *spans;
  size_t nspans, capspans;
  /* sealed */
  int sealed;
  run *runs;
  size_t nruns;
  uint64_t nnumbers; /* the numbers in the set: the texts' indexes start here */
  /* the other ids: NUL-terminated in text, offs[i] the start of the i-th */
  char *text;
  size_t textlen, textcap;
  size_t *offs;
  size_t ntexts, captexts;
};

int ob_queue_ids_number(const char *id, size_t len, uint64_t *out) {
  if (!len || len > 19 || (len > 1 && id[0] == '0'))
    return 0;
  uint64_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (id[i] < '0' || id[i] > '9')
      return 0;
    n = n * 10 + (uint64_t)(id[i] - '0');
  }
  *out = n;
  return 1;
}

ob_queue_ids *ob_queue_ids_new(void) { return ob_xcalloc(1, sizeof(ob_queue_ids)); }

void ob_queue_ids_free(ob_queue_ids *s) {
  if (!s)
    return;
  free(s->nums);
  free(s->spans);
  free(s->runs);
  free(s->text);
  free(s->offs);
  free(s);
}

static void add_span(ob_queue_ids *s, uint64_t first, uint64_t last) {
  if (s->nspans == s->capspans) {
    s->capspans = s->capspans ? s->capspans * 2 : 16;
    s->spans = ob_xrealloc(s->spans, s->capspans * sizeof *s->spans);
  }
  s->spans[s->nspans++] = (span){first, last};
}

/* The run of consecutive numbers being added: a span, or (one number) a number. */
static void flush_run(ob_queue_ids *s) {
  if (!s->in_run)
    return;
  s->in_run = 0;
  if (s->run_first != s->run_last) {
    add_span(s, s->run_first, s->run_last);
    return;
  }
  if (s->nnums == s->capnums) {
    s->capnums = s->capnums ? s->capnums * 2 : 64;
    s->nums = ob_xrealloc(s->nums, s->capnums * sizeof *s->nums);
  }
  s->nums[s->nnums++] = s->run_first;
}

void ob_queue_ids_add(ob_queue_ids *s, const char *id, size_t len) {
  if (s->sealed || !len || len > OB_QUEUE_IDS_TEXT_MAX)
    return;
  uint64_t n;
  if (ob_queue_ids_number(id, len, &n)) {
    if (s->in_run && n == s->run_last + 1) { /* ids in order, as submit prints them */
      s->run_last = n;
      return;
    }
    flush_run(s);
    s->in_run = 1;
    s->run_first = s->run_last = n;
    return;
  }
  if (s->ntexts == s->captexts) {
    s->captexts = s->captexts ? s->captexts * 2 : 16;
    s->offs = ob_xrealloc(s->offs, s->captexts * sizeof *s->offs);
  }
  while (s->textlen + len + 1 > s->textcap) {
    s->textcap = s->textcap ? s->textcap * 2 : 256;
    s->text = ob_xrealloc(s->text, s->textcap);
  }
  s->offs[s->ntexts++] = s->textlen;
  memcpy(s->text + s->textlen, id, len);
  s->text[s->textlen + len] = '\0';
  s->textlen += len + 1;
}

void ob_queue_ids_add_range(ob_queue_ids *s, uint64_t first, uint64_t last) {
  if (!s->sealed && first <= last)
    add_span(s, first, last);
}

static int by_number(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int by_first(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->first < y->first ? -1 : x->first > y->first;
}

static int by_text(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

size_t ob_queue_ids_seal(ob_queue_ids *s) {
  if (s->sealed)
    return ob_queue_ids_count(s);
  flush_run(s);
  s->sealed = 1;
  /* the numbers added one by one, as spans of consecutive ones */
  if (s->nnums) /* qsort's array is never NULL, even for none */
    qsort(s->nums, s->nnums, sizeof *s->nums, by_number);
  for (size_t i = 0; i < s->nnums;) {
    size_t j = i;
    while (j + 1 < s->nnums && s->nums[j + 1] <= s->nums[j] + 1)
      j++;
    add_span(s, s->nums[i], s->nums[j]);
    i = j + 1;
  }
  free(s->nums);
  s->nums = NULL;
  s->nnums = s->capnums = 0;
  /* every span, sorted, overlapping and touching ones made one run */
  if (s->nspans)
    qsort(s->spans, s->nspans, sizeof *s->spans, by_first);
  size_t m = 0;
  for (size_t i = 0; i < s->nspans; i++) {
    if (m && s->spans[i].first <= s->spans[m - 1].last + 1) {
      if (s->spans[i].last > s->spans[m - 1].last)
        s->spans[m - 1].last = s->spans[i].last;
    } else {
      s->spans[m++] = s->spans[i];
    }
  }
  s->runs = ob_xmalloc((m ? m : 1) * sizeof *s->runs);
  uint64_t base = 0;
  for (size_t i = 0; i < m; i++) {
    s->runs[i] = (run){s->spans[i].first, base};
    base += s->spans[i].last - s->spans[i].first + 1;
  }
  s->nruns = m;
  s->nnumbers = base;
  free(s->spans);
  s->spans = NULL;
  s->nspans = s->capspans = 0;
  /* the texts, sorted (as pointers: the buffer no longer moves), each once */
  const char **ptrs = ob_xmalloc((s->ntexts ? s->ntexts : 1) * sizeof *ptrs);
  for (size_t i = 0; i < s->ntexts; i++)
    ptrs[i] = s->text + s->offs[i];
  if (s->ntexts)
    qsort(ptrs, s->ntexts, sizeof *ptrs, by_text);
  size_t k = 0;
  for (size_t i = 0; i < s->ntexts; i++)
    if (!k || strcmp(ptrs[i], s->text + s->offs[k - 1]))
      s->offs[k++] = (size_t)(ptrs[i] - s->text);
  s->ntexts = k;
  free(ptrs);
  return ob_queue_ids_count(s);
}

size_t ob_queue_ids_count(const ob_queue_ids *s) {
  return s->sealed ? (size_t)s->nnumbers + s->ntexts : 0;
}

/* The run that holds number n (or would: the last whose first is <= n); nruns when none. */
static size_t run_of(const ob_queue_ids *s, uint64_t n) {
  size_t lo = 0, hi = s->nruns;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->runs[mid].first <= n)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? lo - 1 : s->nruns;
}

static uint64_t run_len(const ob_queue_ids *s, size_t r) {
  return (r + 1 < s->nruns ? s->runs[r + 1].base : s->nnumbers) - s->runs[r].base;
}

size_t ob_queue_ids_find(const ob_queue_ids *s, const char *id, size_t len) {
  if (!s->sealed || !len || len > OB_QUEUE_IDS_TEXT_MAX)
    return OB_QUEUE_IDS_NONE;
  uint64_t n;
  if (ob_queue_ids_number(id, len, &n)) {
    size_t r = run_of(s, n);
    if (r == s->nruns || n - s->runs[r].first >= run_len(s, r))
      return OB_QUEUE_IDS_NONE;
    return (size_t)(s->runs[r].base + (n - s->runs[r].first));
  }
  size_t lo = 0, hi = s->ntexts;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *t = s->text + s->offs[mid];
    int c = strncmp(t, id, len);
    if (!c)
      c = t[len] ? 1 : 0;
    if (!c)
      return (size_t)s->nnumbers + mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return OB_QUEUE_IDS_NONE;
}

size_t ob_queue_ids_get(const ob_queue_ids *s, size_t i, char *buf) {
  if ((uint64_t)i >= s->nnumbers) {
    const char *t = s->text + s->offs[i - s->nnumbers];
    size_t len = strlen(t);
    memcpy(buf, t, len + 1);
    return len;
  }
  size_t lo = 0, hi = s->nruns; /* the last run whose base is <= i */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->runs[mid].base <= (uint64_t)i)
      lo = mid + 1;
    else
      hi = mid;
  }
  const run *r = &s->runs[lo - 1];
  return (size_t)snprintf(buf, OB_QUEUE_IDS_TEXT_MAX + 1, "%llu",
                          (unsigned long long)(r->first + ((uint64_t)i - r->base)));
}

size_t ob_queue_ids_bytes(const ob_queue_ids *s) {
  return sizeof *s + s->nruns * sizeof *s->runs + s->textcap + s->captexts * sizeof *s->offs +
         s->capnums * sizeof *s->nums + s->capspans * sizeof *s->spans;
}
