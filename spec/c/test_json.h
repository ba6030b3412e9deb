/* test_json.h -- a JSON text the test writes, parsed (NULL, said on stderr, when the
 * test's own text is not JSON): what the schema tests build their schemas from. */
#ifndef OB_TEST_JSON_H
#define OB_TEST_JSON_H

#include <stdio.h>
#include <string.h>

#include "base/ob_value.h"

static inline ob_value *json(const char *text) {
  ob_error err;
  ob_value *v = ob_json_parse(text, strlen(text), &err);
  if (!v)
    fprintf(stderr, "  bad JSON in the test: %s: %s\n", text, err.msg);
  return v;
}

#endif
