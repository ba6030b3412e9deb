/* fuzz_expr.c -- libFuzzer target: any bytes as a reference expression (both modes)
 * and as a bare path; whatever parses must format back to text that parses equal. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_path.h"

static void check_roundtrip(const ob_path *p) {
  ob_buf b;
  ob_buf_init(&b);
  ob_path_format(&b, p);
  ob_path again;
  ob_error err;
  if (ob_path_parse(b.data ? b.data : "", b.len, &again, &err) != OB_OK || !ob_path_equal(p, &again))
    abort(); /* the canonical text must read back to the same path */
  ob_path_free(&again);
  ob_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *s = (const char *)data;
  ob_error err;
  for (int mode = OB_EXPR_INPUT; mode <= OB_EXPR_OUTPUT; mode++) {
    ob_expr e;
    if (ob_expr_parse(s, size, mode, &e, &err) == OB_OK) {
      for (size_t a = 0; a < e.n; a++)
        for (size_t r = 0; r < e.alts[a].n; r++)
          check_roundtrip(&e.alts[a].refs[r].path);
      ob_expr_free(&e);
    } else if (err.code != OB_ESYNTAX && err.code != OB_ENOMEM) {
      abort();
    }
  }
  ob_path p;
  if (ob_path_parse(s, size, &p, &err) == OB_OK) {
    check_roundtrip(&p);
    ob_path_free(&p);
  }
  return 0;
}
