/* ob_wal.h -- the journal writer: a run's lines appended to a file as a crash-safe
 * write-ahead record, with the fsync policy of `--fsync never|batch|always`.
 *
 * What each promise costs
 * -----------------------
 * ob_wal_add copies a line into a buffer owned by the wal: no system call, no lock.
 * ob_wal_flush hands everything buffered to the kernel: from then on the lines
 * survive the process being killed, even by SIGKILL, but not a power cut or a
 * kernel crash. A regular file is mapped (MAP_SHARED) and a flush is a memcpy
 * into the mapping: a store into a shared file mapping is in the page cache at
 * once, so it survives the process as a write(2) would, and fdatasync writes it
 * back as it would a write(2)'s. The file is grown ahead of its lines a chunk at a
 * time (1 MB, doubling up to 64 MB): fallocate reserves the blocks, so that a full
 * disk fails a flush (never a store into a hole: SIGBUS), then the chunk is mapped
 * (a system call or two per chunk, and a page fault per 4 KB page written). Pages
 * behind the lines are unmapped as the lines pass them (every 1 MB), so the
 * process's memory and address space do not grow with the journal. So, until
 * ob_wal_close (or ob_wal_trim) cuts it back to its lines, the file is longer than they are:
 * zeros follow them, and after a crash they still do; every reader of a journal
 * ignores a tail of NUL bytes (ob_journal_len) and OB_WAL_APPEND cuts it. A file
 * that is not regular, or cannot be opened for reading, mapped or fallocated (a
 * file system without fallocate), is written with one write(2) a flush instead
 * (more only after a short write). Measured against write(2), paired medians of
 * OBELUS_BENCH_JOURNAL=batch obelus-bench chain|fanout 100000 (a flush a call on
 * chain): chain 1.64x the calls a second (3.2 us a call -> 1.9 us: the write(2)
 * cost ~1.5 us, the copy with its share of page faults and growth ~0.3 us),
 * fanout 1.50x.
 * Surviving a power cut takes an
 * fsync, which costs a disk round trip (0.5 ms on average on an SSD-backed VM disk,
 * 18 ms at worst, measured; tens of ms on a spinning disk), so the loop thread never
 * makes one while a run goes: the wal's own thread (the syncer) does, and
 *
 *  - OB_FSYNC_NEVER  never fsyncs: a line is as safe as it gets once flushed.
 *  - OB_FSYNC_BATCH  fsyncs at most once per OB_WAL_BATCH_MS: the first flush after
 *                    an fsync opens a window, and one fdatasync at its end covers
 *                    every line flushed meanwhile. A power cut loses at most the
 *                    lines of the last window and one fsync (OB_WAL_BATCH_MS plus
 *                    twice an fsync's time, after their flush); a busy run costs
 *                    at most 1000 / OB_WAL_BATCH_MS fsyncs a second.
 *  - OB_FSYNC_ALWAYS fsyncs as soon as a flush hands lines over, and
 *                    ob_wal_when_durable tells when a given line is on disk. Group
 *                    commit: one fsync runs at a time; the lines flushed while it
 *                    runs are covered together by the next one. A run that writes
 *                    faster than the disk syncs costs one fsync per fsync time,
 *                    not one per line (measured: 20,000 lines, ten a loop turn,
 *                    each flushed and waited for, took 36 to 181 fsyncs).
 *
 * Why a thread of its own rather than libuv's pool (uv_fs_fdatasync): an fsync
 * queued in the pool shares its four threads with tools' file and DNS work, so a
 * burst of those would delay it past its window (and a slow disk would hold a pool
 * thread from them); and a request in flight belongs to the loop until the loop
 * runs its callback, so closing the wal mid-fsync would leave memory, an fd and an
 * active request (uv_loop_close: EBUSY) for a loop the CLI may never run again.
 * The syncer is joined by ob_wal_close instead: nothing of a closed wal is left in
 * the loop, and close is synchronous (it waits for the fsync in flight, then makes
 * the last one). Costs: one thread per wal in BATCH and ALWAYS (a default stack of
 * virtual memory, a few KB of it touched), one uncontended mutex lock per flush,
 * and a condition-variable wake-up when the syncer was idle.
 *
 * The loop hears from the syncer only for ob_wal_when_durable: a uv_async_t handle
 * that exists while waiters wait (it keeps the loop alive for them) and is closed
 * once none is left. BATCH and NEVER wals without waiters never touch the loop.
 *
 * An fsync that fails fails the wal for good: after a failed fsync Linux may mark
 * the unwritten pages clean, so a later fsync that succeeds proves nothing.
 *
 * A file that is not a regular file (a pipe, /dev/stdout, a character device)
 * cannot be fsynced: there the mode is NEVER whatever was asked (ob_wal_mode).
 *
 * Threads: every ob_wal_* function is for the thread that runs the loop (any one
 * thread, when there is no loop); the syncer is the wal's own business. Another
 * thread may add and flush lines under a lock of its own while the loop's thread
 * leaves the wal alone and no waiter is registered (ob_wal_when_durable: its
 * callbacks come from the loop): what a run on threads does (ob_shard.c). */
#ifndef OB_WAL_H
#define OB_WAL_H

#include <stdint.h>
#include <uv.h>

#include "base/ob_error.h"
#include "base/ob_value.h"

typedef enum ob_fsync { OB_FSYNC_NEVER, OB_FSYNC_BATCH, OB_FSYNC_ALWAYS } ob_fsync;

/* "never", "batch" or "always" -> *out: OB_OK, or OB_EINVAL for anything else. */
int ob_fsync_parse(const char *s, ob_fsync *out);
/* The mode's name as ob_fsync_parse reads it. */
const char *ob_fsync_name(ob_fsync mode);

/* BATCH's window: how long after a flush its lines wait for their fsync at most
 * (plus the fsync in flight, if any). 50 ms: a crash loses what 50 ms wrote, at
 * 20 fsyncs a second at most, 1% of a disk that syncs in 0.5 ms. */
#define OB_WAL_BATCH_MS 50

enum {
  OB_WAL_CREATE = 1,   /* a new file. A regular file (or none yet) is written aside and
                          put in place by the first flush that writes lines (so the file
                          never exists without its first lines, and nothing at all is
                          left when none were written); an existing non-empty file is
                          refused, never truncated, unless OB_WAL_OVERWRITE: then it is
                          replaced (rename) by that flush. A file that appears at the
                          path meanwhile is not replaced (that flush fails). A symbolic
                          link is followed: the file it leads to is written. Anything
                          else (a pipe, a terminal, /dev/null) is written as it is. */
  OB_WAL_APPEND = 2,   /* keep the file (a regular file that exists) and add to its end;
                          a tail of zeros and a torn last line are cut first
                          (ob_wal_torn) */
  OB_WAL_OVERWRITE = 4 /* with OB_WAL_CREATE: an existing file may be replaced */
};

/* Locking: a wal of a regular file holds flock(LOCK_EX) on it from open to close (on
 * the file it replaces too, until it does): a second writer's ob_wal_open is refused
 * ("FILE is being written by another obelus (pid N)"); readers do not lock. */

typedef struct ob_wal ob_wal;

/* Opens path for writing lines. loop is where ob_wal_when_durable calls back (it
 * may be NULL when that is never used). flags: OB_WAL_CREATE or OB_WAL_APPEND.
 * With OB_WAL_APPEND, the NUL bytes a mapped writer that died left after its lines
 * are cut (not a torn line: no fsync for it), and a last line without its '\n'
 * (a process died while writing it) is cut, back to the end of the last complete line, before anything is added;
 * in BATCH and ALWAYS the cut is fsynced before open returns. NULL on error with err
 * naming the file (OB_EIO; OB_EINVAL for bad flags, a file locked by another writer,
 * or an existing file OB_WAL_CREATE may not replace). */
ob_wal *ob_wal_open(uv_loop_t *loop, const char *path, int flags, ob_fsync mode, ob_error *err);

/* OB_WAL_APPEND, before any line is added: checks that the file holds `expect` bytes
 * of lines (after what open cut), as its reader saw it (else it changed since it
 * was read: OB_EIO, the wal failed), then cuts it to len bytes (fsynced unless
 * NEVER). OB_OK, OB_EINVAL for a len past the end or a wal that is not fresh. */
int ob_wal_cut_to(ob_wal *w, uint64_t expect, uint64_t len);
/* The bytes of lines in the file (what was there, after open's cuts, plus what was
 * flushed). */
uint64_t ob_wal_size(const ob_wal *w);

/* Adds one line (text without its '\n'; text must hold none) to the buffer and
 * returns its sequence number: 1, 2, ... for the lines added through this wal (not
 * counting lines the file held before). No system call. 0 when the wal has failed
 * (nothing is added). */
uint64_t ob_wal_add(ob_wal *w, const char *text, size_t len);
/* The same for a value: its compact JSON, printed straight into the buffer. */
uint64_t ob_wal_add_value(ob_wal *w, const ob_value *v);

/* The same, printed in place: ob_wal_line gives the buffer to add one line's text
 * to (no '\n' in it), or NULL when the wal has failed (then add nothing);
 * ob_wal_line_end ends that line and returns its sequence number. No copy. */
ob_buf *ob_wal_line(ob_wal *w);
uint64_t ob_wal_line_end(ob_wal *w);
/* The same for a line whose text the caller ended with its '\n' itself (the journal's
 * records: ob_jrec_write writes whole lines). */
uint64_t ob_wal_line_ended(ob_wal *w);

/* Hands every buffered line to the kernel (a copy into the file's mapping, the
 * file grown first when they do not fit; or one write(2), short writes and EINTR
 * continued). Once it returns OB_OK the lines survive the process being killed.
 * In BATCH and ALWAYS it tells the syncer, never waits for it. On failure (disk
 * full, file too large, I/O error, or an earlier failed fsync) returns OB_EIO and
 * the wal is failed for good: every later add, flush and waiter fails at once, and
 * ob_wal_error says what happened, naming the file. A mapped file that cannot
 * grow for the lines refuses them whole; a write that failed halfway leaves a torn
 * last line, which readers ignore and OB_WAL_APPEND cuts. */
int ob_wal_flush(ob_wal *w);

/* A copy of every flush: fn(ud, bytes, len) is called by each ob_wal_flush that
 * hands lines to the kernel, after it did, with exactly those bytes (whole lines,
 * each with its '\n'), on the loop's thread. `obelus worker` ships its jobs'
 * journals to Redis this way. fn NULL: none. */
typedef void (*ob_wal_tee_fn)(void *ud, const char *bytes, size_t len);
void ob_wal_set_tee(ob_wal *w, ob_wal_tee_fn fn, void *ud);
/* Fails w for good with the error why (copied: "run.jsonl: cannot write the journal:
 * ..."), as a failed write would: a tee whose copy could not be kept calls it, and the
 * flush that called the tee then fails. Nothing if w had failed already. */
void ob_wal_fail(ob_wal *w, const char *why);

/* Flushes, then cuts the file back to its lines now rather than at close: for a
 * journal that is complete (its end record added), so that it reads as it will
 * once closed (no zeros after its lines) while its run is still open. A later flush grows
 * the file again. OB_OK, or the wal's failure. */
int ob_wal_trim(ob_wal *w);

/* Calls cb(ud, status) once, on the loop thread, from the loop (never from within
 * this or another ob_wal function), when line seq is durable: status OB_OK. That is,
 *  - ALWAYS and BATCH: an fsync that started after the line was flushed completed
 *    (ALWAYS starts one at once; BATCH within OB_WAL_BATCH_MS of the flush);
 *  - NEVER: the line was flushed (on the loop's next turn after that flush).
 * A line still in the buffer waits for the flush that writes it: this does not
 * flush. When the wal fails first, cb gets the failure's code (OB_EIO) instead.
 * Waiters are called in the order they were registered among those that become
 * ready together. While any waits, the wal keeps the loop alive (a referenced
 * handle). Waiters left when the wal is closed are dropped, never called.
 * Returns OB_OK, or OB_EINVAL (nothing registered) for a seq not added yet or a
 * wal opened without a loop. */
typedef void (*ob_wal_durable_cb)(void *ud, int status);
int ob_wal_when_durable(ob_wal *w, uint64_t seq, ob_wal_durable_cb cb, void *ud);

/* Flushes, cuts the file back to its lines (the zeros reserved after them go),
 * fsyncs (unless NEVER), closes the file and frees w, synchronously: it
 * waits for an fsync in flight, and once it returns no thread or request of w's is
 * left and no callback of w's will run. OB_OK when every line added is durable,
 * else the wal's error (also in err, naming the file). The one thing left to the
 * loop: if waiters were still registered, their handle is closing, and the loop
 * must turn once (uv_run) before uv_loop_close, as for any closed handle
 * (ob_engine_free's shutdown does). Call it before freeing the loop's engine: an
 * engine that owns its loop closes every handle on it. */
int ob_wal_close(ob_wal *w, ob_error *err);

/* The last line added (0 before the first). */
uint64_t ob_wal_seq(const ob_wal *w);
/* The last line known durable, as ob_wal_when_durable defines it. */
uint64_t ob_wal_durable(ob_wal *w);
/* Bytes added and not flushed yet. */
size_t ob_wal_pending(const ob_wal *w);
/* fsyncs of the file completed so far (the syncer's, and the cut's at open). */
uint64_t ob_wal_fsyncs(ob_wal *w);
/* The mode in effect: the one asked for, or NEVER for a file that is not regular. */
ob_fsync ob_wal_mode(const ob_wal *w);
/* BATCH's window for this wal, in ms (from its open: OB_WAL_BATCH_MS). The tests
 * make it an hour long, to see close end it early without reading a clock. */
void ob_wal_set_window(ob_wal *w, unsigned ms);
const char *ob_wal_path(const ob_wal *w);
/* NULL while the wal works; after a failure, what failed, naming the file
 * ("run.jsonl: cannot write the journal: No space left on device"). */
const char *ob_wal_error(ob_wal *w);

/* What OB_WAL_APPEND cut from the end of the file. */
typedef struct ob_wal_cut {
  size_t line;     /* the torn line's number (1-based) */
  uint64_t offset; /* the byte where it started: the file's size now */
  uint64_t bytes;  /* how many bytes were cut */
} ob_wal_cut;
/* 1 (and *cut filled) when ob_wal_open cut a torn last line, else 0. */
int ob_wal_torn(const ob_wal *w, ob_wal_cut *cut);

#endif
