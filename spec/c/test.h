/* test.h -- the smallest test harness that does the job: one program per behaviour,
 * each TEST a function, each failed CHECK printed with file and line. */
#ifndef OB_TEST_H
#define OB_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failed_checks_;
static int test_passed_, test_failed_;
static const char *test_current_;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      test_failed_checks_++;                                                         \
      fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__,         \
              test_current_, #cond);                                                 \
    }                                                                                \
  } while (0)

#define CHECK_INT(a, b)                                                              \
  do {                                                                               \
    long long a_ = (long long)(a), b_ = (long long)(b);                              \
    if (a_ != b_) {                                                                  \
      test_failed_checks_++;                                                         \
      fprintf(stderr, "  %s:%d: %s: %s == %lld, expected %s == %lld\n", __FILE__,    \
              __LINE__, test_current_, #a, a_, #b, b_);                              \
    }                                                                                \
  } while (0)

#define CHECK_STR(a, b)                                                              \
  do {                                                                               \
    const char *a_ = (a), *b_ = (b);                                                 \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                         \
      test_failed_checks_++;                                                         \
      fprintf(stderr, "  %s:%d: %s: %s is \"%s\", expected \"%s\"\n", __FILE__,      \
              __LINE__, test_current_, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");  \
    }                                                                                \
  } while (0)

#define RUN(name)                                                                    \
  do {                                                                               \
    int before_ = test_failed_checks_;                                               \
    test_current_ = #name;                                                           \
    name();                                                                          \
    if (test_failed_checks_ == before_) {                                            \
      test_passed_++;                                                                \
      printf("ok - %s\n", #name);                                                    \
    } else {                                                                         \
      test_failed_++;                                                                \
      printf("not ok - %s\n", #name);                                                \
    }                                                                                \
  } while (0)

/* Last line of every test program; spec/run-c adds these up. */
#define TEST_END()                                                                   \
  (printf("# %d passed, %d failed\n", test_passed_, test_failed_), fflush(stdout),   \
   test_failed_ ? 1 : 0)

#endif
