/* ob_api.h -- what the C API's files share beyond obelus.h: the engine behind a
 * host's obelus_engine (obelus.c), for the API's other files (obelus_queue.c). */
#ifndef OB_API_H
#define OB_API_H

#include "engine/ob_engine.h"
#include "obelus.h"

ob_engine *ob_api_engine(obelus_engine *E);

#endif
