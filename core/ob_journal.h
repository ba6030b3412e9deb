/* ob_journal.h -- reading a log back from a file: a JSON array of messages, or a
 * journal (JSON Lines, one message a line, as `run --journal` writes it). */
#ifndef OB_JOURNAL_H
#define OB_JOURNAL_H

#include "ob_log.h"

/* Appends every message of the file at path to log, in order. The format is
 * told by the first non-blank character: '[' a JSON array, anything else
 * JSON Lines (blank lines are skipped). On error returns a negative code
 * with err naming the file, the line (JSON Lines) or message index (array),
 * and the reason; the messages before the bad one stay appended. */
int ob_journal_load(ob_log *log, const char *path, ob_error *err);

#endif
