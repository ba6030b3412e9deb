/* fuzz_log.c -- libFuzzer target: any bytes as JSON Lines messages appended to a log
 * (with and without history), then read back and printed; nothing may crash or leak,
 * and every message printed must read back as a message. */
#include <stdlib.h>
#include <string.h>

#include "log/ob_log.h"

static const char *const exprs[] = {"\xE2\x80\xA0state", "\xE2\x80\xA0input.a.b",
                                    "\xE2\x80\xA0" "data.user || \xE2\x80\xA0state.x.0",
                                    "\xE2\x80\xA0" "error"};

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  for (int keep = 0; keep <= 1; keep++) {
    ob_log *log = ob_log_new();
    ob_log_keep_history(log, keep);
    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      const char *stop = nl ? nl : end;
      ob_error err;
      ob_value *msg = ob_json_parse(p, (size_t)(stop - p), &err);
      if (msg) {
        ob_log_append(log, msg, &err);
        ob_unref(msg);
      }
      p = nl ? nl + 1 : end;
    }
    for (size_t i = 0; i < sizeof exprs / sizeof *exprs; i++) {
      ob_expr e;
      ob_error err;
      if (ob_expr_parse(exprs[i], strlen(exprs[i]), OB_EXPR_INPUT, &e, &err) != OB_OK)
        abort();
      ob_value *v = ob_log_eval(log, &e, NULL, OB_LOG_NOW);
      ob_value *w = ob_log_eval(log, &e, "i", keep ? ob_log_len(log) / 2 : OB_LOG_NOW);
      char *text = v ? ob_json_print(v, 0, NULL) : NULL;
      free(text);
      ob_unref(v);
      ob_unref(w);
      ob_expr_free(&e);
    }
    ob_log *again = ob_log_new();
    for (size_t i = 0; i < ob_log_len(log); i++) {
      ob_value *m = ob_log_message(log, i);
      size_t len;
      char *text = ob_json_print(m, 0, &len);
      ob_error err;
      ob_value *back = ob_json_parse(text, len, &err);
      /* keys with NUL bytes do not survive jansson: the one known gap */
      if (back && ob_log_append(again, back, &err) < 0 && err.code != OB_EDEPTH && err.code != OB_EWRITE)
        abort();
      ob_unref(back);
      free(text);
      ob_unref(m);
    }
    ob_log_free(again);
    ob_log_free(log);
  }
  return 0;
}
