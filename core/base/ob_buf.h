/* ob_buf.h -- a growable byte buffer for building text, and reading a file whole into
 * one (ob_buf.c). Below the values: the JSON printer, the journal, paths and messages
 * all build text in one. */
#ifndef OB_BUF_H
#define OB_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "base/ob_error.h"

/* A growable byte buffer, used by the printer and by anyone building text. */
typedef struct ob_buf {
  char *data;
  size_t len, cap;
} ob_buf;
void ob_buf_init(ob_buf *b);
/* Makes room for n more bytes and the NUL after them (the slow part of adding). */
void ob_buf_grow(ob_buf *b, size_t n);
/* Adding is inline: the journal and the printers add a few bytes at a time. */
static inline void ob_buf_reserve(ob_buf *b, size_t n) {
  if (n >= b->cap - b->len) /* len + n + 1 > cap, without overflow (len <= cap) */
    ob_buf_grow(b, n);
}
static inline void ob_buf_add(ob_buf *b, const char *s, size_t n) {
  ob_buf_reserve(b, n);
  if (n)
    memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}
static inline void ob_buf_addc(ob_buf *b, char c) {
  ob_buf_reserve(b, 1);
  b->data[b->len++] = c;
  b->data[b->len] = '\0';
}
/* Appends n's decimal digits (two a step: the journal writes a 16-digit time a line). */
void ob_buf_add_uint(ob_buf *b, uint64_t n);
void ob_buf_addf(ob_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Text a plan, a tool or a journal controls (an _id, a tool name, a path, an error
 * message) printed for a person: terminal controls are written escaped, so that an
 * ANSI sequence in an _id shows as \x1b[31m rather than turning the terminal red.
 * Escaped: C0 control bytes (\xNN; with OB_ESC_LINES, newline and tab are kept), DEL,
 * the C1 controls U+0080..U+009F (\u0080: a UTF-8 terminal may take U+009B for CSI)
 * and bytes that are not UTF-8 (\xNN); and the backslash is written as it is (the
 * result is for reading, not for parsing back). */
enum { OB_ESC_LINES = 1 };
/* Into a new NUL-terminated string (free it); ob_buf_add_escaped appends to a buffer.
 * The CLI has the writers to its streams (ob_cli.h). */
char *ob_escape_text(const char *s, size_t len, int flags);
/* Appends s's n bytes escaped for a person (OB_ESC_LINES, ob_escape_text above). */
void ob_buf_add_escaped(ob_buf *b, const char *s, size_t n, int flags);
/* The same with a va_list (ap is used up). */
void ob_buf_vaddf(ob_buf *b, const char *fmt, va_list ap);
void ob_buf_free(ob_buf *b);
/* Cuts b's text to at most max bytes (0: no limit), at a character's start, and
 * says so: "... (<what> cut at N KB of M KB)". */
void ob_buf_cut(ob_buf *b, size_t max, const char *what);
/* An error message is cut at the smaller of --max-output and OB_MESSAGE_MAX: it
 * is for people, and it is journaled once and printed twice (message and traceback). */
#define OB_MESSAGE_MAX ((size_t)64 * 1024)
size_t ob_message_max(size_t max_output);
/* Appends the whole content of the file at path ("-": standard input) to b.
 * OB_OK, or OB_EIO with err naming the file. A directory, a device or a socket is
 * refused ("is a character device, not a regular file"); a FIFO is read (a path the
 * user named on the command line: `--input @<(cmd)`). */
int ob_read_file(const char *path, ob_buf *b, ob_error *err);
/* The same file opened to be read a piece at a time (stdin for "-": not to be
 * fclosed), as ob_read_file would read it; NULL with err naming the file. */
FILE *ob_file_open_read(const char *path, ob_error *err);
/* The same for a file a plan or a folder names (a delegated plan, a tool file): only
 * a regular file is read, a FIFO refused too, never waited for. */
int ob_read_regular_file(const char *path, ob_buf *b, ob_error *err);
/* OB_OK when path is a regular file; OB_EIO naming what it is otherwise (not blocking). */
int ob_file_check_regular(const char *path, ob_error *err);

#endif
