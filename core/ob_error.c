/* ob_error.c -- filling error records and naming error codes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ob_error.h"

int ob_error_set(ob_error *err, int code, size_t pos, const char *fmt, ...) {
  if (err) {
    va_list ap;
    err->code = code;
    err->pos = pos;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

const char *ob_strerror(int code) {
  switch (code) {
  case OB_OK: return "success";
  case OB_ENOMEM: return "out of memory";
  case OB_EINVAL: return "invalid argument";
  case OB_ESYNTAX: return "malformed reference or path";
  case OB_EJSON: return "malformed JSON";
  case OB_EWRITE: return "output method cannot apply";
  case OB_EDEPTH: return "value nested too deep";
  case OB_EIO: return "input/output error";
  case OB_ETYPE: return "wrong JSON type";
  case OB_ENOENT: return "absent";
  default: return "unknown error";
  }
}

void ob_fputs_escaped(FILE *f, const char *text, size_t n, int flags) {
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
      fwrite(s + plain, 1, i - plain, f);
      if (escape == 2)
        fprintf(f, "\\u%04x", s[i + 1]);
      else
        fprintf(f, "\\x%02x", c);
      plain = i + len;
    }
    i += len;
  }
  fwrite(s + plain, 1, n - plain, f);
}

char *ob_escape_text(const char *s, size_t n, int flags) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (!f)
    abort();
  ob_fputs_escaped(f, s, n, flags);
  if (fclose(f) != 0 || !out)
    abort();
  return out;
}

void ob_eprintf(const char *fmt, ...) {
  char small[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  char *text = small;
  if ((size_t)n >= sizeof small) {
    if (!(text = malloc((size_t)n + 1)))
      abort();
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  ob_fputs_escaped(stderr, text, (size_t)n, OB_ESC_LINES);
  if (text != small)
    free(text);
}
