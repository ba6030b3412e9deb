/* fuzz_plan.c -- libFuzzer target: any bytes as a plan file: it parses (or not),
 * validates, builds its graph and finds its cycles without crashing or leaking. */
#include <stdlib.h>

#include "plan/ob_plan.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  ob_error err;
  ob_value *v = ob_json_parse((const char *)data, size, &err);
  if (!v)
    return 0;
  ob_plan *p = ob_plan_from_value(v, "fuzz.json");
  ob_map tools;
  ob_map_init(&tools);
  ob_plan_check_tools(p, &tools, 0);
  ob_map_free(&tools);
  ob_plan_free(p);
  ob_unref(v);
  return 0;
}
