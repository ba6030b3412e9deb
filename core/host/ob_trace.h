/* ob_trace.h -- a run's journal as the trace viewers people know read it
 * (ob_trace.c): the Chrome Trace Event format (Perfetto, chrome://tracing) and
 * OpenTelemetry spans in OTLP/JSON. `obelus log JOURNAL --format trace|otlp`.
 *
 * What a journal tells: each call attempt's start and end (its records' "t"),
 * its params (the plan), what they read (the documents as of its first start: the
 * messages before that record), its outputs and errors (the messages before its
 * settled record), and, through the plan's dependency graph, which calls read what
 * others wrote. Journals written before records carried "t" have no times: their
 * attempts are drawn at the _date of the messages around them, or at 0.
 *
 * Costs: the journal read once, its calls and their attempts held in memory; for
 * OB_TRACE_RUN, each run's documents too (as they are: no history), and each call's
 * references read once at its first start. Measured on 2 busy cores: 10,000 calls
 * 1 s, 100,000 calls (a 55 MB journal) 8 s, of which the journal's JSON is 3 s and
 * the resolved params 1 s. */
#ifndef OB_TRACE_H
#define OB_TRACE_H

#include "base/ob_error.h"
#include "log/ob_journal.h"
#include "base/ob_value.h"

typedef enum ob_trace_format {
  OB_TRACE_CHROME, /* the Chrome Trace Event format */
  OB_TRACE_OTLP,   /* OTLP/JSON */
  OB_TRACE_RUN     /* what `obelus report` draws (and `obelus ui` serves): {"plan", "exit",
                      "duration_us", "t0_us" (the first start, in us since 1970), "calls": [{"id",
                      "scope", "tool", "instance", "state", "attempts": [[start_us, end_us,
                      error]], "progress", "settled", "params", "resolved", "output", "error",
                      "deps": [indices into calls], "parent", "node"}]}, times from the run's
                      first start. state: running, done, failed, skipped, never ran, or
                      handled: its attempts failed and its last `||` alternative received the
                      error (written there: "output"; its text: "error"), so the run went on.
                      params: the call as written; resolved: the call as its first attempt
                      read it (its references' values in its run's documents as of its first
                      start record, "††" literals unescaped; meta-properties as written), null
                      when it never started. parent: the index in calls of the call whose run
                      this call's is (the delegating call, the _each call; the scope's last
                      part), null at the top. node: its node's id in ob_graph.h's drawing
                      ("call-<i>", "call-<i>-<k>", ...), null when it has none */
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
