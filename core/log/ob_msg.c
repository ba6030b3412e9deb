/* ob_msg.c -- the messages obelus puts in a log, built in one place (ob_msg.h). */
#include "log/ob_msg.h"

ob_value *ob_msg_plan(const ob_value *plan, const char *file) {
  ob_value *m = ob_object();
  m = ob_object_set(m, "type", 4, ob_cstring("plan"));
  m = ob_object_set(m, "file", 4, ob_cstring(file));
  return ob_object_set(m, "plan", 4, ob_ref((ob_value *)plan));
}

ob_value *ob_msg_data(ob_value *kind, ob_value *data, ob_value *instance) {
  ob_value *m = ob_object();
  m = ob_object_set(m, "type", 4, ob_cstring("data"));
  m = ob_object_set(m, "kind", 4, kind);
  if (instance)
    m = ob_object_set(m, "_instance", 9, instance);
  return ob_object_set(m, "data", 4, data);
}

ob_value *ob_msg_error(const ob_value *call_raw, const char *id, const char *msg,
                       const char *phase, int detached, const char *instance,
                       const ob_value *sublog) {
  ob_value *data = ob_object();
  data = ob_object_set(data, "call", 4, ob_ref((ob_value *)call_raw));
  data = ob_object_set(data, "id", 2, ob_cstring(id));
  data = ob_object_set(data, "error", 5, ob_cstring(msg));
  data = ob_object_set(data, "phase", 5, ob_cstring(phase));
  if (detached)
    data = ob_object_set(data, "detached", 8, ob_true());
  ob_value *m = ob_msg_data(ob_cstring("error"), data, instance ? ob_cstring(instance) : NULL);
  if (sublog)
    m = ob_object_set(m, "_log", 4, ob_ref((ob_value *)sublog));
  return m;
}

ob_value *ob_msg_problem(const char *msg, int step) {
  ob_value *d = ob_object();
  d = ob_object_set(d, "error", 5, ob_cstring(msg));
  d = ob_object_set(d, "phase", 5, ob_cstring("validation"));
  d = ob_object_set(d, "step", 4, ob_int(step));
  return ob_msg_data(ob_cstring("error"), d, NULL);
}
