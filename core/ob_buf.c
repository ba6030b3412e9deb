/* ob_buf.c -- a growable byte buffer for building text (JSON, paths, messages).
 * Always NUL-terminated after the first add, so data can be used as a C string. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ob_value.h"

void ob_buf_init(ob_buf *b) {
  b->data = NULL;
  b->len = b->cap = 0;
}

void ob_buf_grow(ob_buf *b, size_t extra) {
  if (extra > SIZE_MAX / 4 - b->len)
    abort(); /* no buffer is that big: a length gone wrong, not a wish to honour */
  size_t need = b->len + extra + 1;
  if (need <= b->cap)
    return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p)
    abort();
  b->data = p;
  b->cap = cap;
}

void ob_buf_add_uint(ob_buf *b, uint64_t n) {
  static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                              "31323334353637383940414243444546474849505152535455565758596061"
                              "62636465666768697071727374757677787980818283848586878889909192"
                              "93949596979899";
  char d[20]; /* UINT64_MAX has 20 digits */
  size_t k = sizeof d;
  while (n >= 100) {
    unsigned two = (unsigned)(n % 100);
    n /= 100;
    d[--k] = pairs[2 * two + 1];
    d[--k] = pairs[2 * two];
  }
  if (n >= 10) {
    d[--k] = pairs[2 * n + 1];
    d[--k] = pairs[2 * n];
  } else {
    d[--k] = (char)('0' + n);
  }
  ob_buf_add(b, d + k, sizeof d - k);
}

void ob_buf_addf(ob_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n <= 0)
    return;
  if ((size_t)n < sizeof tmp) {
    ob_buf_add(b, tmp, (size_t)n);
    return;
  }
  ob_buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void ob_buf_cut(ob_buf *b, size_t max, const char *what) {
  if (!max || b->len <= max)
    return;
  size_t total = b->len, n = max;
  while (n > 0 && ((unsigned char)b->data[n] & 0xC0) == 0x80)
    n--; /* not inside a UTF-8 character */
  b->len = n;
  b->data[n] = '\0';
  ob_buf_addf(b, " ... (%s cut at %zu KB of %zu KB)", what, max >> 10, (total + 1023) >> 10);
}

size_t ob_message_max(size_t max_output) {
  return max_output && max_output < OB_MESSAGE_MAX ? max_output : OB_MESSAGE_MAX;
}

void ob_buf_free(ob_buf *b) {
  free(b->data);
  ob_buf_init(b);
}

int ob_read_file(const char *path, ob_buf *b, ob_error *err) {
  int is_stdin = !strcmp(path, "-");
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f)
    return ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(errno));
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    ob_buf_add(b, chunk, n);
  int failed = ferror(f);
  if (!is_stdin)
    fclose(f);
  if (failed)
    return ob_error_set(err, OB_EIO, 0, "%s: read error", is_stdin ? "standard input" : path);
  if (!b->data)
    ob_buf_add(b, "", 0);
  return OB_OK;
}
