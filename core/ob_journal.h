/* ob_journal.h -- reading a log back from a file: a JSON array of messages, or a
 * journal (JSON Lines, one message a line, as `run --journal` writes it). */
#ifndef OB_JOURNAL_H
#define OB_JOURNAL_H

#include "ob_log.h"

/* Appends every message of the file at path to log, in order. The format is
 * told by the first non-blank character: '[' a JSON array, anything else
 * JSON Lines (blank lines and records are skipped; a torn last line is
 * reported on stderr and skipped). On error returns a negative code
 * with err naming the file, the line (JSON Lines) or message index (array),
 * and the reason; the messages before the bad one stay appended. */
int ob_journal_load(ob_log *log, const char *path, ob_error *err);

/* 1 when v is a journal record ({"journal": ...}), not a message. */
int ob_journal_is_record(const ob_value *v);

#endif
