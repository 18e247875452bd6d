/*
 * test_files.c — the file contract of meshtrain/files.h: inputs are regular
 * files of a bounded size opened without blocking, and claimed outputs are
 * written through a locked temporary file, renamed when complete, refused to
 * a second process while claimed, and taken over when their owner died.
 * The references are the file system itself (stat, the bytes read back) and
 * a second process made with fork.
 */
#include "harness.h"
#include "meshtrain/files.h"
#include "meshtrain/io.h"   /* mt_file_check_save */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { char dir[64]; char path[256]; } scratch;

static void scratch_open(scratch *sc) {
    snprintf(sc->dir, sizeof sc->dir, "/tmp/mt_test_files_XXXXXX");
    MT_CHECK(mkdtemp(sc->dir) != NULL, "mkdtemp: %s", strerror(errno));
}

/* sc->dir/name, valid until the next call. */
static const char *at(scratch *sc, const char *name) {
    snprintf(sc->path, sizeof sc->path, "%s/%s", sc->dir, name);
    return sc->path;
}

/* out[256] = sc->dir/name, tmp[300] = its temporary name (name + ".tmp"). */
static void output_names(scratch *sc, const char *name, char *out, char *tmp) {
    snprintf(out, 256, "%s", at(sc, name));
    snprintf(tmp, 300, "%s%s", out, MT_TMP_SUFFIX);
}

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    if (d) closedir(d);
    return n;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

/* The whole of path as a string ("" when missing), in buf[n]. */
static const char *get(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f) fclose(f);
    return buf;
}

static void scratch_close(scratch *sc) {
    DIR *d = opendir(sc->dir);
    char p[512];
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", sc->dir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    if (d) closedir(d);
    rmdir(sc->dir);
}

/* ---- inputs ------------------------------------------------------------- */

MT_TEST(inputs_are_regular_files_of_bounded_size) {
    scratch sc;
    scratch_open(&sc);
    FILE *f = NULL;
    int64_t size = -1;
    char path[256], fifo[256], dir[256];
    snprintf(path, sizeof path, "%s", at(&sc, "in.json"));
    snprintf(fifo, sizeof fifo, "%s", at(&sc, "p"));
    snprintf(dir, sizeof dir, "%s", at(&sc, "d"));
    put(path, "0123456789");
    MT_CHECK(mkfifo(fifo, 0600) == 0 && mkdir(dir, 0700) == 0, "mkfifo, mkdir");

    MT_CHECK_OK(mt_input_open(path, "trace", 10, &f, &size));
    MT_CHECK(f && size == 10 && fgetc(f) == '0', "opened %p, size %lld", (void *)f, (long long)size);
    fclose(f);
    /* a writer-less FIFO returns at once (it would block a plain open) */
    MT_CHECK_FAILS(mt_input_open(fifo, "trace", 0, &f, NULL), MT_EIO, "trace '", "FIFO",
                   "not a regular file");
    MT_CHECK(f == NULL, "a refused input left a stream");
    MT_CHECK_FAILS(mt_input_open(dir, "trace", 0, &f, NULL), MT_EIO, "a directory",
                   "give the trace inside it");
    MT_CHECK_FAILS(mt_input_open("/dev/zero", "machine file", 0, &f, NULL), MT_EIO,
                   "character device");
    MT_CHECK_FAILS(mt_input_open(path, "schedule", 9, &f, NULL), MT_EIO, "10 bytes",
                   "more than the 9 bytes a schedule may be");
    MT_CHECK_FAILS(mt_input_open(at(&sc, "none"), "metrics", 0, &f, NULL), MT_EIO,
                   "cannot open metrics", "No such file");
    MT_CHECK_FAILS(mt_input_open("", "trace", 0, &f, NULL), MT_EINVAL, "empty");

    char *text = NULL;
    size_t len = 0;
    MT_CHECK_OK(mt_input_read_all(path, "trace", 0, &text, &len));
    MT_CHECK(len == 10 && strcmp(text, "0123456789") == 0, "read '%s' (%zu)", text, len);
    free(text);
    MT_CHECK_FAILS(mt_input_read_all(fifo, "trace", 0, &text, &len), MT_EIO, "FIFO");
    MT_CHECK(text == NULL, "a refused read left a buffer");
    scratch_close(&sc);
}

/* ---- outputs ------------------------------------------------------------ */

static mt_status write_hello(FILE *f, void *arg) {
    fputs((const char *)arg, f);
    return MT_OK;
}

static mt_status write_fails(FILE *f, void *arg) {
    (void)arg;
    fputs("half", f);
    return mt_fail(MT_EFORMAT, "the writer gave up");
}

MT_TEST(a_claim_writes_through_its_temporary_file) {
    scratch sc;
    scratch_open(&sc);
    char out[256], tmp[300], buf[64];
    output_names(&sc, "out.svg", out, tmp);
    put(out, "old");
    mt_output *o;
    MT_CHECK_OK(mt_output_claim(out, "picture", &o));
    struct stat st;
    MT_CHECK(stat(tmp, &st) == 0 && S_ISREG(st.st_mode), "the claim holds no temporary file");
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "old") == 0, "the claim touched the target");
    MT_CHECK(strcmp(mt_output_path(o), out) == 0 && strcmp(mt_output_tmp_path(o), tmp) == 0,
             "paths %s %s", mt_output_path(o), mt_output_tmp_path(o));

    /* a failed write leaves the previous version */
    MT_CHECK_FAILS(mt_output_write(o, write_fails, NULL), MT_EFORMAT, "gave up");
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "old") == 0, "a failed write replaced '%s'", buf);
    MT_CHECK_OK(mt_output_write(o, write_hello, "new"));
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "new") == 0, "target holds '%s'", buf);
    /* the claim goes on: a second version, and the temporary name is held again */
    MT_CHECK(stat(tmp, &st) == 0, "the claim lost its temporary file after the commit");
    MT_CHECK_OK(mt_output_write(o, write_hello, "newer"));
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "newer") == 0, "target holds '%s'", buf);
    mt_output_close(o);
    MT_CHECK(count_files(sc.dir) == 1, "%d files after close, want the output alone",
             count_files(sc.dir));
    scratch_close(&sc);
}

MT_TEST(claims_refuse_what_a_write_would_destroy) {
    scratch sc;
    scratch_open(&sc);
    mt_output *o = NULL;
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s", at(&sc, "p"));
    MT_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    MT_CHECK_FAILS(mt_output_claim(fifo, "trace", &o), MT_EIO, "FIFO", "not a regular file");
    MT_CHECK_FAILS(mt_output_claim(sc.dir, "trace", &o), MT_EIO, "a directory");
    MT_CHECK_FAILS(mt_output_claim("/dev/full", "trace", &o), MT_EIO, "character device");
    MT_CHECK_FAILS(mt_output_claim(at(&sc, "nodir/t.json"), "trace", &o), MT_EIO,
                   "No such file");
    MT_CHECK_FAILS(mt_output_claim(at(&sc, "x.ckpt.tmp"), "checkpoint", &o), MT_EINVAL,
                   "temporary", "x.ckpt'");
    MT_CHECK_FAILS(mt_output_claim("", "trace", &o), MT_EINVAL, "empty");
    MT_CHECK(o == NULL, "a refused claim returned a handle");
    /* a name one byte short of NAME_MAX fits; with ".tmp" it does not */
    char longname[512];
    int k = snprintf(longname, sizeof longname, "%s/", sc.dir);
    memset(longname + k, 'n', 252);
    longname[k + 252] = '\0';
    MT_CHECK_FAILS(mt_output_claim(longname, "trace", &o), MT_EIO, "too long");
    MT_CHECK(count_files(sc.dir) == 1, "%d files, want the FIFO alone", count_files(sc.dir));
    scratch_close(&sc);
}

/* A second process is refused while the first holds the claim, and takes
 * the output over once the first died without releasing it (kill -9). */
MT_TEST(a_second_writer_is_refused_until_the_first_dies) {
    scratch sc;
    scratch_open(&sc);
    char out[256], tmp[300], buf[64];
    output_names(&sc, "model.ckpt", out, tmp);
    int ready[2];
    MT_CHECK(pipe(ready) == 0, "pipe");
    pid_t child = fork();
    MT_CHECK(child >= 0, "fork");
    if (child == 0) {
        mt_output *o;
        char c = mt_output_claim(out, "checkpoint", &o) == MT_OK ? 'y' : 'n';
        FILE *f;
        /* what a checkpoint starts with (io/checkpoint.c's format: the magic) */
        if (c == 'y' && mt_output_begin(o, &f) == MT_OK)
            fwrite("MTCKPT\0\0half", 1, 12, f), fflush(f);
        if (write(ready[1], &c, 1) != 1) _exit(2);
        pause();   /* killed while writing */
        _exit(0);
    }
    char c = 0;
    MT_CHECK(read(ready[0], &c, 1) == 1 && c == 'y', "the child could not claim");
    mt_output *o = NULL;
    MT_CHECK_FAILS(mt_output_claim(out, "checkpoint", &o), MT_EBUSY, "another run is writing",
                   "model.ckpt'", "model.ckpt.tmp");
    MT_CHECK(strcmp(get(tmp, buf, sizeof buf), "MTCKPT") == 0,
             "the refused claim touched the other's temporary file ('%s')", buf);
    kill(child, SIGKILL);
    int status;
    waitpid(child, &status, 0);
    close(ready[0]);
    close(ready[1]);
    /* its lock died with it: the stale temporary file is taken over */
    MT_CHECK_OK(mt_output_claim(out, "checkpoint", &o));
    MT_CHECK_OK(mt_output_write(o, write_hello, "whole"));
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "whole") == 0, "target holds '%s'", buf);
    /* one process claiming twice is refused too (the locks are per open) */
    mt_output *again = NULL;
    MT_CHECK_FAILS(mt_output_claim(out, "checkpoint", &again), MT_EBUSY, "another run");
    mt_output_close(o);
    MT_CHECK(count_files(sc.dir) == 1, "%d files, want the checkpoint alone", count_files(sc.dir));
    scratch_close(&sc);
}

/* A symbolic link planted at the temporary name is removed, never followed. */
MT_TEST(a_link_at_the_temporary_name_is_not_followed) {
    scratch sc;
    scratch_open(&sc);
    char out[256], tmp[300], victim[256], buf[64];
    output_names(&sc, "t.json", out, tmp);
    snprintf(victim, sizeof victim, "%s", at(&sc, "victim"));
    put(victim, "keep me");
    MT_CHECK(symlink(victim, tmp) == 0, "symlink");
    mt_output *o;
    MT_CHECK_OK(mt_output_claim(out, "trace", &o));
    MT_CHECK_OK(mt_output_write(o, write_hello, "trace"));
    mt_output_close(o);
    MT_CHECK(strcmp(get(victim, buf, sizeof buf), "keep me") == 0, "the link was followed");
    MT_CHECK(strcmp(get(out, buf, sizeof buf), "trace") == 0, "target holds '%s'", buf);
    scratch_close(&sc);
}

/* A "<path>.tmp" nobody holds is taken over only when a killed save can
 * have left it: empty, or starting as a file meshtrain saves. The starts
 * are written here from the formats (checkpoint.c's magic, llm.c's int32
 * magics, the trace's and the pictures' first text), not taken from the
 * code under test. A user's own file there is refused and left as it was. */
MT_TEST(a_temporary_name_holding_another_file_is_refused) {
    scratch sc;
    scratch_open(&sc);
    char out[256], tmp[300], buf[64];
    output_names(&sc, "notes.ckpt", out, tmp);
    static const struct { const char *bytes; size_t n; } left[] = {
        {"", 0},
        {"MTCKPT\0\0\1\0\0\0", 12},
        {"\xc6\xd7\x34\x01\x03\0\0\0", 8},       /* llm.c checkpoint: 20240326, version 3 */
        {"\x88\xd8\x34\x01\x01\0\0\0", 8},       /* llm.c tokens: 20240520, version 1 */
        {"{\"traceEvents\":[\n{\"name\"", 25},
        {"{\"cpu\": \"x86\"", 14},
        {"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=", 50},
        {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=", 46},
    };
    mt_output *o = NULL;
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        FILE *f = fopen(tmp, "wb");
        MT_CHECK(f && fwrite(left[i].bytes, 1, left[i].n, f) == left[i].n && fclose(f) == 0,
                 "cannot write %s", tmp);
        MT_CHECK_OK(mt_output_claim(out, "checkpoint", &o));
        struct stat st;
        MT_CHECK(stat(tmp, &st) == 0 && st.st_size == 0, "leftover %zu was not emptied", i);
        mt_output_close(o);
        MT_CHECK(stat(tmp, &st) != 0, "leftover %zu: the released claim left its file", i);
    }
    /* not a save's: text, a JSON of another program, the start of a magic only */
    static const char *const mine[] = {"my notes: keep\n", "{\"notes\": 1}", "MTCK", "<svg>"};
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
        put(tmp, mine[i]);
        MT_CHECK_FAILS(mt_output_claim(out, "checkpoint", &o), MT_EIO, "notes.ckpt.tmp",
                       "no save of meshtrain left", "move it away");
        MT_CHECK(o == NULL, "a refused claim returned an output");
        MT_CHECK(strcmp(get(tmp, buf, sizeof buf), mine[i]) == 0, "the user's file now holds "
                 "'%s', was '%s'", buf, mine[i]);
        MT_CHECK_FAILS(mt_file_check_save(out), MT_EIO, "no save of meshtrain left");
        MT_CHECK(strcmp(get(tmp, buf, sizeof buf), mine[i]) == 0, "checked: '%s'", buf);
    }
    MT_CHECK(count_files(sc.dir) == 1, "%d files, want the user's alone", count_files(sc.dir));
    scratch_close(&sc);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
