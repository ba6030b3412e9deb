/* fuzz_schema.c -- libFuzzer target: bytes split at the first NUL into a JSON Schema
 * and an instance; compiling and validating never crash, loop or leak. */
#include <stdlib.h>
#include <string.h>

#include "base/ob_schema.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *s = (const char *)data, *nul = memchr(s, '\0', size);
  if (!nul)
    return 0;
  ob_error err;
  ob_value *schema = ob_json_parse(s, (size_t)(nul - s), &err);
  ob_value *inst = schema ? ob_json_parse(nul + 1, size - (size_t)(nul - s) - 1, &err) : NULL;
  if (schema && inst) {
    ob_schema *sc = ob_schema_compile(schema, &err);
    if (sc) {
      ob_schema_result res = {0};
      int quick = ob_schema_validate(sc, inst, NULL);
      int full = ob_schema_validate(sc, inst, &res);
      if (quick != full || (full == 1) != (res.n == 0))
        abort(); /* the yes/no answer and the collected one must agree */
      ob_schema_result_free(&res);
      ob_schema_free(sc);
    }
  }
  ob_unref(schema);
  ob_unref(inst);
  return 0;
}
