/* ob_msg.h -- the messages obelus itself puts in a log (plan-format §5), built in one place:
 * the plan message a run's log opens with, a data message (an input, a delegated
 * plan's scope, a log's entry given back as JSON), a call's error message and a
 * loop step's problem. Whoever appends them (ob_run.c, ob_delegate.c, ob_settle.c,
 * ob_log.c, `obelus loop`) builds them here, so their members and order are the
 * same everywhere (a journal's bytes depend on the order).
 *
 * Costs: one object and its members; the values handed in are taken over, not
 * copied. */
#ifndef OB_MSG_H
#define OB_MSG_H

#include "base/ob_value.h"

/* {"type":"plan","file":FILE,"plan":PLAN} (plan borrowed) */
ob_value *ob_msg_plan(const ob_value *plan, const char *file);

/* {"type":"data","kind":KIND[,"_instance":INSTANCE],"data":DATA}: kind, data and
 * instance (NULL: none) are taken over. More members may be set after it (ob_log.c's
 * _path, _date ...). */
ob_value *ob_msg_data(ob_value *kind, ob_value *data, ob_value *instance);

/* A call's error message (plan-format §5):
 * {"type":"data","kind":"error"[,"_instance":I],
 *  "data":{"call":CALL,"id":ID,"error":MSG,"phase":PHASE[,"detached":true]}[,"_log":LOG]}
 * call_raw and sublog borrowed (sublog: a delegating call's run's messages, or NULL). */
ob_value *ob_msg_error(const ob_value *call_raw, const char *id, const char *msg,
                       const char *phase, int detached, const char *instance,
                       const ob_value *sublog);

/* A loop step's plan problem, as the planner reads it back:
 * {"type":"data","kind":"error","data":{"error":MSG,"phase":"validation","step":STEP}} */
ob_value *ob_msg_problem(const char *msg, int step);

#endif
