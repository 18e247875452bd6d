/*
 * harness.h — a small test runner in the manner of libuv's: every case runs in
 * a child process with a timeout, so a crash or a hang fails that case with a
 * message instead of taking the whole program down.
 *
 *   MT_TEST(layernorm_grad) { ... MT_CHECK(cond, "fmt", ...); ... }
 *   int main(int argc, char **argv) { return mt_test_main(argc, argv); }
 *
 * `test_x name` runs one case in-process (handy under gdb); MT_TEST_TIMEOUT
 * (seconds, default 120) bounds each case.
 */
#ifndef MT_TEST_HARNESS_H
#define MT_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 in a build under AddressSanitizer (with UBSan) or ThreadSanitizer, else 0.
 * The instrumented code runs 3-15x slower: a case whose work is volume
 * (streamed gigabytes, hundreds of steps, long sequences under finite
 * differences) does less of it there, every check kept, and `make test`
 * runs it whole on the release build too (ctest label release,
 * CMakeLists.txt). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MT_TEST_SANITIZED 1
#endif
#endif
#ifndef MT_TEST_SANITIZED
#define MT_TEST_SANITIZED 0
#endif

/* 1 in a build under ThreadSanitizer, else 0. TSan's subject is the
 * synchronisation of the threads transport and the schedules: a case that
 * runs again a timetable another case already runs under TSan (more
 * microbatches of the same schedule, a checkpoint round trip) skips there
 * with MT_TEST_SKIP_IF, and runs under ASan and on the release build. */
#if defined(__SANITIZE_THREAD__)
#define MT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MT_TEST_TSAN 1
#endif
#endif
#ifndef MT_TEST_TSAN
#define MT_TEST_TSAN 0
#endif

typedef void (*mt_test_fn)(void);
void mt_test_register(const char *name, mt_test_fn fn);
int  mt_test_main(int argc, char **argv);
/* mt_test_main run in a new directory under $TMPDIR (or /tmp), removed with
 * the files the cases left in it: for a program whose cases write files by
 * relative names, which would otherwise land wherever it is started (a
 * source tree, where they were once committed). */
int  mt_test_main_in_scratch(int argc, char **argv);
void mt_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Ends the running case as skipped, saying why (its line reads "skip"; the
 * run's summary counts it apart from the passes). Use MT_TEST_SKIP_IF. */
void mt_test_skip(const char *why);

/* Skips the rest of the case when cond holds: MT_TEST_SKIP_IF(MT_TEST_TSAN,
 * "pipe2_m4_gpipe runs the same timetable"). */
#define MT_TEST_SKIP_IF(cond, why)                                           \
    do { if (cond) { mt_test_skip(why); return; } } while (0)

#define MT_TEST(name)                                                        \
    static void mt_test_##name(void);                                        \
    __attribute__((constructor)) static void mt_test_reg_##name(void) {      \
        mt_test_register(#name, mt_test_##name);                             \
    }                                                                        \
    static void mt_test_##name(void)

/* Fails the case with a message when cond is false. */
#define MT_CHECK(cond, ...)                                                  \
    do { if (!(cond)) mt_test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Fails unless a call returned MT_OK; prints its status and message. */
#define MT_CHECK_OK(call)                                                    \
    do { mt_status mt__s = (call);                                           \
         if (mt__s != MT_OK)                                                 \
             mt_test_fail(__FILE__, __LINE__, "%s -> %s: %s", #call,         \
                          mt_status_name(mt__s), mt_errmsg()); } while (0)

/* Fails unless a call returned `code` with a message containing every
 * string given: MT_CHECK_FAILS(f(x), MT_EINVAL, "'x'", "positive"). */
#define MT_CHECK_FAILS(call, code, ...)                                                    \
    do {                                                                                   \
        mt_status s_ = (call);                                                             \
        MT_CHECK(s_ == (code), "%s -> %s (%s), want %s", #call, mt_status_name(s_),        \
                 mt_errmsg(), mt_status_name(code));                                       \
        const char *want_[] = {__VA_ARGS__};                                               \
        for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                     \
            MT_CHECK(strstr(mt_errmsg(), want_[i_]), "%s: message '%s' does not name '%s'", \
                     #call, mt_errmsg(), want_[i_]);                                       \
    } while (0)

/* |got - want| <= tol · max(1, |want|), i.e. relative above 1, absolute below. */
#define MT_CHECK_CLOSE(got, want, tol, ...)                                  \
    do { double mt__g = (double)(got), mt__w = (double)(want);               \
         double mt__scale = fabs(mt__w) > 1.0 ? fabs(mt__w) : 1.0;           \
         if (!(fabs(mt__g - mt__w) <= (tol) * mt__scale)) {                  \
             char mt__buf[256]; snprintf(mt__buf, sizeof mt__buf, __VA_ARGS__); \
             mt_test_fail(__FILE__, __LINE__, "%s: got %.9g, want %.9g (tol %g)", \
                          mt__buf, mt__g, mt__w, (double)(tol)); } } while (0)

#endif
