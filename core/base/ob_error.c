/* ob_error.c -- filling error records and naming error codes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/ob_error.h"

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

