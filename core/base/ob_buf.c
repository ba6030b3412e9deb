/* ob_buf.c -- a growable byte buffer for building text (JSON, paths, messages).
 * Always NUL-terminated after the first add, so data can be used as a C string. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ob_buf.h"

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

void ob_buf_vaddf(ob_buf *b, const char *fmt, va_list ap) {
  char tmp[256];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  if (n <= 0) {
    va_end(again);
    return;
  }
  if ((size_t)n < sizeof tmp) {
    ob_buf_add(b, tmp, (size_t)n);
    va_end(again);
    return;
  }
  ob_buf_reserve(b, (size_t)n);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
  va_end(again);
  b->len += (size_t)n;
}

void ob_buf_addf(ob_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ob_buf_vaddf(b, fmt, ap);
  va_end(ap);
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

static int read_stream(FILE *f, const char *name, ob_buf *b, ob_error *err) {
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    ob_buf_add(b, chunk, n);
  if (ferror(f))
    return ob_error_set(err, OB_EIO, 0, "%s: read error", name);
  if (!b->data)
    ob_buf_add(b, "", 0);
  return OB_OK;
}

/* What a file that is not a regular one is, for messages; NULL for a regular file. */
static const char *odd_kind(mode_t m) {
  return S_ISREG(m) ? NULL : S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Opened without blocking (a FIFO with no writer would wait for one) and judged by
 * fstat, not by its name. A FIFO is read only when fifo_ok: stat tells first, and it is
 * opened blocking, so that it waits for its writer as a plain open would (closing a
 * FIFO's read end to open it again would drop what a writer had put in). */
static FILE *open_file(const char *path, int fifo_ok, ob_error *err) {
  struct stat st;
  int fifo = fifo_ok && stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
  int fd = open(path, O_RDONLY | O_CLOEXEC | (fifo ? 0 : O_NONBLOCK));
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(e));
    return NULL;
  }
  const char *kind = odd_kind(st.st_mode);
  if (kind && !(fifo && S_ISFIFO(st.st_mode))) {
    close(fd);
    ob_error_set(err, OB_EIO, 0, "%s: is %s, not a regular file", path, kind);
    return NULL;
  }
  if (!fifo)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(errno));
  }
  return f;
}

static int read_file(const char *path, ob_buf *b, int fifo_ok, ob_error *err) {
  if (!strcmp(path, "-"))
    return read_stream(stdin, "standard input", b, err);
  FILE *f = open_file(path, fifo_ok, err);
  if (!f)
    return OB_EIO;
  int rc = read_stream(f, path, b, err);
  fclose(f);
  return rc;
}

FILE *ob_file_open_read(const char *path, ob_error *err) {
  return strcmp(path, "-") ? open_file(path, 1, err) : stdin;
}

int ob_read_file(const char *path, ob_buf *b, ob_error *err) { return read_file(path, b, 1, err); }

int ob_read_regular_file(const char *path, ob_buf *b, ob_error *err) {
  return read_file(path, b, 0, err);
}

int ob_file_check_regular(const char *path, ob_error *err) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return ob_error_set(err, OB_EIO, 0, "%s: %s", path, strerror(e));
  }
  close(fd);
  const char *kind = odd_kind(st.st_mode);
  return kind ? ob_error_set(err, OB_EIO, 0, "%s: is %s, not a regular file", path, kind) : OB_OK;
}

void ob_buf_add_escaped(ob_buf *b, const char *text, size_t n, int flags) {
  const unsigned char *s = (const unsigned char *)text;
  size_t plain = 0; /* bytes before i to write as they are */
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t len = 1;
    int escape;
    if (c < 0x20)
      escape = !((flags & OB_ESC_LINES) && (c == '\n' || c == '\t'));
    else if (c < 0x7F)
      escape = 0;
    else if (c == 0x7F)
      escape = 1;
    else if ((len = ob_utf8_seq(s + i, n - i)))
      escape = c == 0xC2 && s[i + 1] < 0xA0 ? 2 : 0; /* U+0080..U+009F */
    else
      escape = 1, len = 1;
    if (escape) {
      ob_buf_add(b, (const char *)s + plain, i - plain);
      if (escape == 2)
        ob_buf_addf(b, "\\u%04x", s[i + 1]);
      else
        ob_buf_addf(b, "\\x%02x", c);
      plain = i + len;
    }
    i += len;
  }
  ob_buf_add(b, (const char *)s + plain, n - plain);
}

char *ob_escape_text(const char *s, size_t n, int flags) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add_escaped(&b, s, n, flags);
  if (!b.data)
    ob_buf_add(&b, "", 0);
  return b.data;
}
