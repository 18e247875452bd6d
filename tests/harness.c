/* harness.c — runs each registered case in a forked child under a timeout. */
#include "harness.h"
#include "meshtrain/base.h"

#include <stdbool.h>

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MT_MAX_TESTS 512

static struct { const char *name; mt_test_fn fn; } tests[MT_MAX_TESTS];
static int n_tests;
static bool in_child;   /* a forked case: mt_test_skip exits with MT_TEST_SKIPPED */

/* A case's exit code when it skipped (ctest's SKIP_RETURN_CODE, as below). */
#define MT_TEST_SKIPPED 77

void mt_test_register(const char *name, mt_test_fn fn) {
    if (n_tests == MT_MAX_TESTS) { fprintf(stderr, "too many tests\n"); abort(); }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void mt_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  FAIL %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

void mt_test_skip(const char *why) {
    printf("  skip: %s\n", why);
    fflush(stdout);
    if (in_child) exit(MT_TEST_SKIPPED);   /* exit: LeakSanitizer still reports */
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs one case in a child; returns 0 on pass. */
static int run_case(int i, int timeout_s) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        alarm((unsigned)timeout_s);   /* SIGALRM kills the child: a hang fails */
        in_child = true;
        tests[i].fn();
        /* exit, not _exit: LeakSanitizer reports at exit, so a case that
         * leaks fails under ASan (the parent flushed stdio before fork) */
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
        fprintf(stderr, "  FAIL %s: timed out after %d s (a hang?)\n", tests[i].name, timeout_s);
    else
        fprintf(stderr, "  FAIL %s: killed by signal %d (%s)\n", tests[i].name, sig, strsignal(sig));
    return 1;
}

/* MT_TEST_LEVEL caps the kernel level for the whole run (ctest runs the
 * kernel and bf16 tests again at each level below the best this way). A
 * level at or above this CPU's best would rerun what the plain entry runs:
 * skip instead (ctest's SKIP_RETURN_CODE 77). Returns true when the caller
 * should return *rc; a misspelt level fails. */
static bool skip_for_level(int *rc) {
    const char *want = getenv("MT_TEST_LEVEL");
    if (!want || !*want) return false;
    if (mt_set_cpu_isa(want) != MT_OK) {
        fprintf(stderr, "MT_TEST_LEVEL: %s\n", mt_errmsg());
        *rc = 2;
        return true;
    }
    if (mt_get_cpu_isa() < mt_cpu_isa_best()) {
        printf("  (kernel level %s; this CPU's best is %s)\n", want,
               mt_cpu_isa_name(mt_cpu_isa_best()));
        return false;
    }
    printf("skipped: MT_TEST_LEVEL=%s is this CPU's best kernel level (%s) or above: the plain "
           "run of this test covers it\n", want, mt_cpu_isa_name(mt_cpu_isa_best()));
    *rc = MT_TEST_SKIPPED;
    return true;
}

int mt_test_main(int argc, char **argv) {
    int skip_rc;
    if (skip_for_level(&skip_rc)) return skip_rc;
    const char *env = getenv("MT_TEST_TIMEOUT");
    int timeout_s = env ? atoi(env) : 120;
    if (timeout_s <= 0) timeout_s = 120;
    if (argc > 1) {   /* run the named cases in-process */
        int found = 0;
        for (int a = 1; a < argc; a++)
            for (int i = 0; i < n_tests; i++)
                if (strcmp(tests[i].name, argv[a]) == 0) { tests[i].fn(); found++; }
        if (!found) { fprintf(stderr, "no test named %s\n", argv[1]); return 2; }
        printf("%d passed, 0 failed\n", found);
        return 0;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n_tests; i++) {
        double t0 = now();
        int rc = run_case(i, timeout_s);
        const char *verdict = rc == 0 ? "ok" : rc == MT_TEST_SKIPPED ? "skip" : "FAIL";
        printf("%-4s %-44s %7.3f s\n", verdict, tests[i].name, now() - t0);
        fflush(stdout);
        if (rc == 0) passed++; else if (rc == MT_TEST_SKIPPED) skipped++; else failed++;
    }
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}

int mt_test_main_in_scratch(int argc, char **argv) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mt-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir) || chdir(dir) != 0) {
        perror("test harness: a scratch directory");
        return 1;
    }
    const int rc = mt_test_main(argc, argv);
    /* the cases' files: plain files, by name (none makes a directory) */
    DIR *d = opendir(".");
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(e->d_name);
    if (d) closedir(d);
    if (chdir("/") != 0 || rmdir(dir) != 0) fprintf(stderr, "test harness: %s left behind\n", dir);
    return rc;
}
