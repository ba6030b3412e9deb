/* ob_error.h -- error codes and the error record every fallible core function fills.
 * Errors are negative ints (as in libuv) plus a message a user can act on. */
#ifndef OB_ERROR_H
#define OB_ERROR_H

#include <stddef.h>
#include <stdio.h>

enum {
  OB_OK = 0,
  OB_ENOMEM = -1,   /* out of memory */
  OB_EINVAL = -2,   /* invalid argument or malformed input */
  OB_ESYNTAX = -3,  /* malformed reference, expression or path (see ob_error.pos) */
  OB_EJSON = -4,    /* JSON text does not parse */
  OB_EWRITE = -5,   /* an output method cannot apply at a path (plan-format §4) */
  OB_EDEPTH = -6,   /* value nested deeper than OB_MAX_DEPTH */
  OB_EIO = -7,      /* a file could not be read or written */
  OB_ETYPE = -8,    /* a value of the wrong JSON type */
  OB_ENOENT = -9    /* absent: nothing at that path */
};

/* Deepest nesting a value may have. Parsing is limited to 2048 levels by jansson;
 * writes and the Lua bridge refuse to build values deeper than this. */
#define OB_MAX_DEPTH 4096

typedef struct ob_error {
  int code;      /* one of the OB_E* codes, OB_OK when no error */
  size_t pos;    /* OB_ESYNTAX: 0-based character (code point) offset in the input;
                    OB_EJSON: 1-based line; otherwise 0 */
  char msg[512]; /* what went wrong, ready to print */
} ob_error;

/* Fills err (when not NULL) and returns code. printf-style. */
int ob_error_set(ob_error *err, int code, size_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

const char *ob_strerror(int code);

/* The length of the valid UTF-8 sequence at s[0..n) (n >= 1, s[0] >= 0x80), or 0
 * when it is not one: overlong forms, surrogates and code points above U+10FFFF
 * are not, as for jansson, which would refuse the text. The one decoder of the
 * readers and printers of text (JSON, the bridge, escaping, job names). */
static inline size_t ob_utf8_seq(const unsigned char *s, size_t n) {
  unsigned char b = s[0], lo = 0x80, hi = 0xBF;
  size_t len;
  if (b >= 0xC2 && b <= 0xDF)
    len = 2;
  else if (b == 0xE0)
    len = 3, lo = 0xA0;
  else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
    len = 3;
  else if (b == 0xED)
    len = 3, hi = 0x9F;
  else if (b == 0xF0)
    len = 4, lo = 0x90;
  else if (b >= 0xF1 && b <= 0xF3)
    len = 4;
  else if (b == 0xF4)
    len = 4, hi = 0x8F;
  else
    return 0;
  if (n < len || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t k = 2; k < len; k++)
    if ((s[k] & 0xC0) != 0x80)
      return 0;
  return len;
}


#endif
