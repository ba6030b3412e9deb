/* ob_trace.h -- a run's journal as the trace viewers people know read it
 * (ob_trace.c): the Chrome Trace Event format (Perfetto, chrome://tracing) and
 * OpenTelemetry spans in OTLP/JSON. `obelus log JOURNAL --format trace|otlp`.
 *
 * What a journal tells: each call attempt's start and end (its records' "t"),
 * its params (the plan), its outputs and errors (the messages before its settled
 * record), and, through the plan's dependency graph, which calls read what
 * others wrote. Journals written before records carried "t" have no times: their
 * attempts are drawn at the _date of the messages around them, or at 0.
 *
 * Costs: the journal read once, its calls and their attempts held in memory. */
#ifndef OB_TRACE_H
#define OB_TRACE_H

#include "base/ob_error.h"
#include "log/ob_journal.h"
#include "base/ob_value.h"

typedef enum ob_trace_format {
  OB_TRACE_CHROME, /* the Chrome Trace Event format */
  OB_TRACE_OTLP,   /* OTLP/JSON */
  OB_TRACE_RUN     /* what `obelus report` draws (and `obelus ui` serves): {"plan", "exit",
                      "duration_us", "t0_us" (the first start, in us since 1970), "calls": [{"id", "scope",
                      "tool", "instance", "state", "attempts": [[start_us, end_us, error]],
                      "params", "output", "error", "deps": [indices into calls]}]},
                      times from the run's first start */
} ob_trace_format;

/* The journal at path as a trace: {"traceEvents": [...]} (one complete "X" event per
 * call attempt, a process per instance, a thread per call, flow arrows from each
 * call to the calls that read its output, skipped calls as instant events), or
 * {"resourceSpans": [...]} (one trace per run, a span for the run and one per call
 * attempt, delegated sub-plans' spans parented by their call's). NULL with err when
 * the journal cannot be read. info (may be NULL) gets what ob_journal_read tells of
 * the file (a torn last line, for the caller to say). */
ob_value *ob_trace_build(const char *path, ob_trace_format format, ob_journal_info *info,
                         ob_error *err);
/* The same from a journal's text in memory (len bytes; a fleet job's journal, kept in
 * Redis): name stands for the file in err. The output is what ob_trace_build gives for a
 * file holding the same bytes. */
ob_value *ob_trace_build_text(const char *name, const char *text, size_t len,
                              ob_trace_format format, ob_journal_info *info, ob_error *err);

#endif
