/*
 * tokenizer_spm.c — training and encoding through Debian's SentencePiece
 * tools (package sentencepiece): spm_train and spm_encode, run as child
 * processes with posix_spawn (no shell, so no quoting of paths), their
 * exit status checked, their log kept in an anonymous temporary file and its
 * last reason quoted when they fail. tokenizer.c says why the tools and
 * not the C++ library.
 *
 * spm_train writes "<prefix>.model" and "<prefix>.vocab" in place, so it
 * writes them in a private temporary directory, from which they are copied
 * through the outputs' claims (meshtrain/files.h): a failed training leaves
 * the previous model whole, and two runs never write one model at once.
 */
#define _GNU_SOURCE   /* posix_spawn_file_actions_addclosefrom_np */
#include "io/io_impl.h"
#include "io/tokenizer_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ======================================================================== */
/* Running a tool                                                            */
/* ======================================================================== */

mt_status mt_tokenizer_find_tool(const char *tool, char *path, size_t n) {
    const char *env = getenv("PATH");
    const char *dirs = env && env[0] ? env : "/usr/bin:/bin";
    char buf[PATH_MAX];
    for (const char *d = dirs; d;) {
        const char *colon = strchr(d, ':');
        int len = colon ? (int)(colon - d) : (int)strlen(d);
        int w = snprintf(buf, sizeof buf, "%.*s/%s", len, len ? d : ".", tool);
        struct stat st;
        if (w > 0 && (size_t)w < sizeof buf && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
            access(buf, X_OK) == 0) {
            if (path && snprintf(path, n, "%s", buf) >= (int)n)
                return mt_fail(MT_EINVAL, "the path of %s, '%s', is longer than %zu bytes", tool,
                               buf, n);
            return MT_OK;
        }
        d = colon ? colon + 1 : NULL;
    }
    return mt_fail(MT_EIO, "SentencePiece's %s is not in any directory of $PATH (%s): install "
                   "Debian's %s package (apt-get install %s; `make deps` does it)", tool, dirs,
                   MT_SPM_PACKAGE, MT_SPM_PACKAGE);
}

mt_status mt_tokenizer_check_tools(const mt_tokenizer *tok) {
    if (!tok) return mt_fail(MT_EINVAL, "mt_tokenizer_check_tools: tok is NULL");
    return tok->bpe ? MT_OK : mt_tokenizer_find_tool(MT_SPM_ENCODE, NULL, 0);
}

/* The reason a tool gave for failing: from the last lines of its log, the
 * last one that says something ("... [cond] Vocabulary size too high
 * (20000). Please set it to a value <= 7068."), after its source location. */
static void tool_reason(FILE *log, char *out, size_t n) {
    char tail[4096];
    snprintf(out, n, "it printed nothing");
    if (!log || fseek(log, 0, SEEK_END) != 0) return;
    long size = ftell(log);
    long from = size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0;
    if (size <= 0 || fseek(log, from, SEEK_SET) != 0) return;
    size_t got = fread(tail, 1, sizeof tail - 1, log);
    tail[got] = '\0';
    char *line = NULL;
    for (char *save = NULL, *l = strtok_r(tail, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strspn(l, " \t\r") != strlen(l) && !strstr(l, "Program terminated")) line = l;
    if (!line) return;
    char *r = strrchr(line, ']');
    if (r && strspn(r + 1, " \r") != strlen(r + 1)) line = r + 1;
    line += strspn(line, " ");
    line[strcspn(line, "\r")] = '\0';
    if (strstr(line, "sentences_.empty()"))
        line = "no line of the text was usable (each line is a sentence; lines over 4192 "
               "bytes are skipped)";
    snprintf(out, n, "%s", line);
}

/* Starts `argv` (argv[0] a path) with stdin from in_fd (-1: /dev/null),
 * stdout to out_fd (-1: the log) and stderr to the log; no other file of
 * ours stays open in it. */
static mt_status tool_start(char *const argv[], int in_fd, int out_fd, FILE *log, pid_t *pid) {
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return mt_fail(MT_ENOMEM, "no memory to start %s", argv[0]);
    int log_fd = fileno(log);
    int e = 0;
    if (in_fd >= 0) e = e ? e : posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    else e = e ? e : posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    e = e ? e : posix_spawn_file_actions_adddup2(&fa, out_fd >= 0 ? out_fd : log_fd, 1);
    e = e ? e : posix_spawn_file_actions_adddup2(&fa, log_fd, 2);
    e = e ? e : posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    e = e ? e : posix_spawn(pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        return mt_fail(MT_EIO, "cannot start %s: %s", argv[0], strerror(e));
    return MT_OK;
}

/* Waits for the tool; a non-zero exit or a signal fails with its reason,
 * and *sig (may be NULL) says the signal that killed it (0: none). A tool
 * killed by a signal left its log in the middle (an INFO line): it is not
 * quoted. */
static mt_status tool_wait(const char *what, pid_t pid, FILE *log, int *sig) {
    int status;
    if (sig) *sig = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return mt_fail(MT_EIO, "waiting for %s: %s", what, strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return MT_OK;
    if (WIFSIGNALED(status)) {
        if (sig) *sig = WTERMSIG(status);
        return mt_fail(MT_EFORMAT, "%s was killed by signal %d (%s)", what, WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
    }
    char reason[1024];
    tool_reason(log, reason, sizeof reason);
    return mt_fail(MT_EFORMAT, "%s failed (exit %d): %s", what, WEXITSTATUS(status), reason);
}

/* ======================================================================== */
/* Training                                                                  */
/* ======================================================================== */

/* Copies the file at arg (a path) into f, for mt_output_write. */
static mt_status copy_into(FILE *f, void *arg) {
    const char *src = arg;
    FILE *in = fopen(src, "rb");
    if (!in) return mt_fail(MT_EIO, "spm_train wrote no '%s': %s", src, strerror(errno));
    char buf[1 << 14];
    size_t got;
    bool ok = true;
    while (ok && (got = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, got, f) == got;
    bool bad_in = ferror(in) != 0;
    fclose(in);
    if (bad_in) return mt_fail(MT_EIO, "reading '%s' that spm_train wrote failed", src);
    return MT_OK;   /* a failed write is the stream's: mt_output_write reports it */
}

/* What one training holds, released by train_cleanup. */
typedef struct {
    char       dir[PATH_MAX - 64];   /* the private directory, "" before it exists */
    char       corpus[PATH_MAX], model[PATH_MAX], vocab[PATH_MAX];   /* inside it */
    mt_output *out_model, *out_vocab;
    FILE      *log;
} spm_training;

static void train_cleanup(spm_training *t) {
    if (t->dir[0]) {
        unlink(t->corpus);
        unlink(t->model);
        unlink(t->vocab);
        rmdir(t->dir);
    }
    mt_output_close(t->out_model);
    mt_output_close(t->out_vocab);
    if (t->log) fclose(t->log);
}

/* The private directory with a link to the corpus: spm_train's --input
 * splits its value at commas, which a path may hold. */
static mt_status train_dir(spm_training *t, const char *text_path) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    char real[PATH_MAX];
    if (!realpath(text_path, real))
        return mt_fail(MT_EIO, "cannot resolve text '%s': %s", text_path, strerror(errno));
    if (snprintf(t->dir, sizeof t->dir, "%s/meshtrain-spm-XXXXXX", tmp) >= (int)sizeof t->dir ||
        !mkdtemp(t->dir)) {
        int e = errno;
        t->dir[0] = '\0';
        return mt_fail(MT_EIO, "cannot make a temporary directory in '%s' for spm_train: %s "
                       "(set TMPDIR to a writable directory)", tmp, strerror(e));
    }
    snprintf(t->corpus, sizeof t->corpus, "%s/corpus.txt", t->dir);
    snprintf(t->model, sizeof t->model, "%s/m.model", t->dir);
    snprintf(t->vocab, sizeof t->vocab, "%s/m.vocab", t->dir);
    if (symlink(real, t->corpus) != 0)
        return mt_fail(MT_EIO, "cannot link '%s' into '%s': %s", real, t->dir, strerror(errno));
    return MT_OK;
}

/* Runs spm_train (found at `exe`) on the corpus of t; *sig as tool_wait's. */
static mt_status train_run(spm_training *t, const char *exe, int vocab, int threads, int *sig) {
    char a_input[PATH_MAX + 16], a_prefix[PATH_MAX + 16], a_vocab[32], a_threads[32];
    snprintf(a_input, sizeof a_input, "--input=%s", t->corpus);
    snprintf(a_prefix, sizeof a_prefix, "--model_prefix=%s/m", t->dir);
    snprintf(a_vocab, sizeof a_vocab, "--vocab_size=%d", vocab);
    snprintf(a_threads, sizeof a_threads, "--num_threads=%d", threads);
    /* lossless (tokenizer.h): bytes for what the vocabulary lacks, text as
     * it is, spaces kept; digits and runs of spaces as llama2.c trains */
    char *argv[] = {
        (char *)exe, a_input, a_prefix, a_vocab, a_threads, "--model_type=bpe",
        "--byte_fallback=true", "--normalization_rule_name=identity",
        "--add_dummy_prefix=false", "--remove_extra_whitespaces=false", "--split_digits=true",
        "--allow_whitespace_only_pieces=true", NULL,
    };
    pid_t pid;
    mt_status s = tool_start(argv, -1, -1, t->log, &pid);
    if (s != MT_OK) return s;
    return tool_wait("spm_train", pid, t->log, sig);
}

mt_status mt_tokenizer_train(const char *text_path, int vocab, const char *prefix, int threads) {
    if (!text_path || !prefix || !prefix[0])
        return mt_fail(MT_EINVAL, "mt_tokenizer_train needs a text file and an output prefix");
    if (vocab < MT_TOKENIZER_MIN_VOCAB)
        return mt_fail(MT_EINVAL, "a vocabulary of %d pieces is too small: a byte-fallback "
                       "tokenizer has at least %d (<unk>, <s>, </s> and the 256 bytes), plus "
                       "one for each character of its text; ask for %d or more (e.g. 4096)",
                       vocab, MT_TOKENIZER_MIN_VOCAB, MT_TOKENIZER_MIN_VOCAB);
    if (vocab > MT_TOKENIZER_MAX_VOCAB)
        return mt_fail(MT_EINVAL, "a vocabulary of %d pieces is more than the %d meshtrain "
                       "trains (its token files stay llm.c's uint16 GPT-2 kind)", vocab,
                       MT_TOKENIZER_MAX_VOCAB);
    char model_path[PATH_MAX], vocab_path[PATH_MAX], exe[PATH_MAX];
    if (snprintf(model_path, sizeof model_path, "%s.model", prefix) >= (int)sizeof model_path ||
        snprintf(vocab_path, sizeof vocab_path, "%s.vocab", prefix) >= (int)sizeof vocab_path)
        return mt_fail(MT_EINVAL, "output prefix '%s' is too long for a path", prefix);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0) threads = 1;

    mt_status s = mt_tokenizer_find_tool(MT_SPM_TRAIN, exe, sizeof exe);
    if (s != MT_OK) return s;
    FILE *f;
    int64_t size = 0;
    if ((s = mt_input_open(text_path, "text", 0, &f, &size)) != MT_OK) return s;
    int64_t chars = 0;
    bool pairs = false;
    if (size > 0) s = mt__text_stats(fileno(f), &chars, &pairs);
    fclose(f);
    if (s != MT_OK) return s;
    if (size == 0)
        return mt_fail(MT_EIO, "text '%s' is empty; a tokenizer trains on the lines of a text",
                       text_path);
    /* spm_train crashes (signal 11) where it finds no pair to merge */
    const int64_t most = MT_TOKENIZER_MIN_VOCAB + chars;   /* the pieces with no merge */
    if (!pairs && vocab > most)
        return mt_fail(MT_EINVAL, "the text is too small: '%s' (%lld byte%s) has %lld distinct "
                       "character%s and no two side by side that BPE could merge into a piece "
                       "(digits stay alone; a space begins a piece), so a tokenizer of it has "
                       "at most %lld pieces (%d + %lld), not %d: give a text of words of two "
                       "or more letters (a few kB of prose), or a vocabulary of %lld",
                       text_path, (long long)size, size == 1 ? "" : "s", (long long)chars,
                       chars == 1 ? "" : "s", (long long)most,
                       MT_TOKENIZER_MIN_VOCAB, (long long)chars, vocab, (long long)most);

    spm_training t = {.dir = ""};
    if ((s = mt_output_claim(model_path, "tokenizer model", &t.out_model)) != MT_OK ||
        (s = mt_output_claim(vocab_path, "tokenizer vocabulary", &t.out_vocab)) != MT_OK)
        goto done;
    if (!(t.log = tmpfile())) {
        s = mt_fail(MT_EIO, "cannot make a temporary file for spm_train's log: %s",
                    strerror(errno));
        goto done;
    }
    int sig = 0;
    if ((s = train_dir(&t, text_path)) != MT_OK ||
        (s = train_run(&t, exe, vocab, threads, &sig)) != MT_OK) {
        /* its crash when the pairs it could merge run out (the check above
         * cannot see every rule of its own: a change of script splits too) */
        if (sig == SIGSEGV || sig == SIGABRT || sig == SIGFPE || sig == SIGBUS)
            s = mt_fail(MT_EFORMAT, "the text is too small: spm_train crashed (signal %d) "
                        "making %d pieces of '%s' (%lld bytes, %lld distinct characters), as "
                        "it does when the text runs out of pairs of characters to merge before "
                        "that many pieces; give a larger text (a few kB of prose), or a "
                        "smaller vocabulary (%lld has no merges)", sig, vocab, text_path,
                        (long long)size, (long long)chars, (long long)most);
        goto done;
    }
    /* what spm_train wrote must open here, at the size asked for, before it replaces a model */
    mt_tokenizer *check;
    if ((s = mt_tokenizer_open(t.model, &check)) != MT_OK) goto done;
    int got = mt_tokenizer_vocab(check);
    mt_tokenizer_free(check);
    if (got != vocab) {
        s = mt_fail(MT_EFORMAT, "spm_train made %d pieces where %d were asked for", got, vocab);
        goto done;
    }
    if ((s = mt_output_write(t.out_model, copy_into, t.model)) == MT_OK)
        s = mt_output_write(t.out_vocab, copy_into, t.vocab);
done:
    train_cleanup(&t);
    return s;
}

/* ======================================================================== */
/* Encoding                                                                  */
/* ======================================================================== */

/* Growing array of ids; `first`: how many the first line of the text gave. */
typedef struct { int32_t *v; int64_t n, cap, first; } id_list;

static bool ids_push(id_list *l, int32_t id) { return mt__ids_append(&l->v, &l->n, &l->cap, id); }

/* Reads spm_encode's output (one line of space-separated ids per line of
 * its text) from fd into l: after each line, the byte pieces of the raw run
 * that ends it (raw, tokenizer_raw.c), or else the newline's id. */
static mt_status read_ids(const mt_tokenizer *tok, int fd, const mt__raw_text *raw,
                          id_list *l) {
    char buf[1 << 15];
    int64_t cur = -1;            /* the id being read, -1 between ids */
    int64_t line = 0, next = 0;  /* spm_encode's line; the next raw run */
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return mt_fail(MT_EIO, "reading spm_encode's output: %s", strerror(errno));
        if (got == 0) break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (c >= '0' && c <= '9') {
                cur = (cur < 0 ? 0 : cur) * 10 + (c - '0');
                if (cur >= tok->V)
                    return mt_fail(MT_EFORMAT, "spm_encode gave id %lld or more, outside the "
                                   "%d pieces of '%s'", (long long)cur, tok->V, tok->path);
                continue;
            }
            if (c != ' ' && c != '\n')
                return mt_fail(MT_EFORMAT, "spm_encode printed byte 0x%02x where ids were "
                               "expected", (unsigned char)c);
            bool ok = cur < 0 || ids_push(l, (int32_t)cur);
            cur = -1;
            if (c != '\n') {
                if (!ok) return mt_fail(MT_ENOMEM, "no memory for %lld ids", (long long)l->n);
                continue;
            }
            if (line == 0) l->first = l->n;
            if (next < raw->n_run && raw->run[next].line == line) {
                const mt__raw_run *r = &raw->run[next++];
                for (int64_t k = 0; ok && k < r->len; k++)
                    ok = ids_push(l, tok->byte_id[raw->bytes[r->first + k]]);
            } else {
                ok = ok && ids_push(l, tok->newline);
            }
            if (!ok) return mt_fail(MT_ENOMEM, "no memory for %lld ids", (long long)l->n);
            line++;
        }
    }
    if (cur >= 0 && !ids_push(l, (int32_t)cur))
        return mt_fail(MT_ENOMEM, "no memory for %lld ids", (long long)l->n);
    if (line == 0) l->first = l->n;
    if (next != raw->n_run)
        return mt_fail(MT_EFORMAT, "spm_encode printed %lld lines where its text has at "
                       "least %lld", (long long)line, (long long)raw->run[raw->n_run - 1].line + 1);
    return MT_OK;
}

/* Runs spm_encode with the model file `model` on the text read from in_fd
 * (at its start) into *l, the raw runs of `raw` put back between its lines. */
static mt_status run_encoder(const mt_tokenizer *tok, const char *model, int in_fd,
                             const mt__raw_text *raw, id_list *l) {
    char exe[PATH_MAX], a_model[PATH_MAX + 16];
    mt_status s = mt_tokenizer_find_tool(MT_SPM_ENCODE, exe, sizeof exe);
    if (s != MT_OK) return s;
    snprintf(a_model, sizeof a_model, "--model=%s", model);
    char *argv[] = {exe, a_model, "--output_format=id", NULL};
    FILE *log = tmpfile();
    int pipe_fd[2] = {-1, -1};
    if (!log || pipe2(pipe_fd, O_CLOEXEC) != 0 || lseek(in_fd, 0, SEEK_SET) != 0) {
        s = mt_fail(MT_EIO, "cannot make spm_encode's log or pipe: %s", strerror(errno));
        if (log) fclose(log);
        if (pipe_fd[0] >= 0) { close(pipe_fd[0]); close(pipe_fd[1]); }
        return s;
    }
    pid_t pid;
    s = tool_start(argv, in_fd, pipe_fd[1], log, &pid);
    close(pipe_fd[1]);
    if (s == MT_OK) {
        s = read_ids(tok, pipe_fd[0], raw, l);
        close(pipe_fd[0]);   /* a reader that gave up: the tool ends on SIGPIPE */
        pipe_fd[0] = -1;
        mt_status w = tool_wait("spm_encode", pid, log, NULL);
        if (s == MT_OK) s = w;
    }
    if (pipe_fd[0] >= 0) close(pipe_fd[0]);
    fclose(log);
    return s;
}

/* The ids of a "▁" alone: its piece, or else its three byte pieces. */
static mt_status dummy_space(const mt_tokenizer *tok, id_list *l) {
    static const char SPACE[] = "\xE2\x96\x81";
    int id = -1;
    for (int i = 0; i < tok->V && id < 0; i++)
        if (tok->type[i] == MT__SPM_NORMAL && strcmp(tok->piece[i], SPACE) == 0) id = i;
    bool ok = id >= 0 ? ids_push(l, id) : true;
    for (int k = 0; id < 0 && k < 3; k++)
        ok = ok && tok->byte_id[(uint8_t)SPACE[k]] >= 0 && ids_push(l, tok->byte_id[(uint8_t)SPACE[k]]);
    if (!ok)
        return mt_fail(MT_EFORMAT, "tokenizer '%s' has no piece for the dummy space U+2581 "
                       "before a text, nor byte pieces for its bytes", tok->path);
    l->first = l->n;
    return MT_OK;
}

/* spm_encode's ids of the text of fd as one text (the multi-line fix of
 * issue 43): a model with a dummy prefix gives the first line as it is, and
 * the others through a copy of it without one (mt__spm_without_dummy), so
 * only the text's start gets the dummy "▁", as SentencePiece's own whole-
 * text encoding, llama2.c's run.c and its data preparation give. */
static mt_status encode_whole(const mt_tokenizer *tok, int fd, const mt__raw_text *raw,
                              id_list *l) {
    if (!tok->dummy_prefix) return run_encoder(tok, tok->path, fd, raw, l);
    char rest[PATH_MAX];
    id_list first = {0};
    mt_status s = mt__spm_without_dummy(tok, rest, sizeof rest);
    if (s != MT_OK) return s;
    s = run_encoder(tok, rest, fd, raw, l);
    unlink(rest);
    if (s == MT_OK && l->first > 0) s = run_encoder(tok, tok->path, fd, raw, &first);
    /* a text that begins with its first line empty begins with the dummy "▁" alone
     * (spm_encode gives an empty line nothing) */
    if (s == MT_OK && l->first == 0 && l->n > 0) s = dummy_space(tok, &first);
    if (s == MT_OK && first.first > 0) {   /* the first line's ids, then the rest's */
        int64_t n = first.first + l->n - l->first;
        int32_t *v = n > l->cap ? realloc(l->v, (size_t)n * sizeof *v) : l->v;
        if (!v) s = mt_fail(MT_ENOMEM, "no memory for %lld ids", (long long)n);
        if (s == MT_OK) {
            memmove(v + first.first, v + l->first, (size_t)(l->n - l->first) * sizeof *v);
            memcpy(v, first.v, (size_t)first.first * sizeof *v);
            l->v = v;
            l->cap = n > l->cap ? n : l->cap;
            l->n = n;
            l->first = first.first;
        }
    }
    free(first.v);
    return s;
}

/* Encodes the text of in_fd, a regular file (read from its start): the
 * bytes spm_encode would not give back are kept aside (tokenizer_raw.c) and
 * spm_encode reads a copy without them, or the file itself when it has
 * none. */
static mt_status encode_fd(const mt_tokenizer *tok, int in_fd, int32_t **ids, int64_t *n) {
    if (tok->newline < 0)
        return mt_fail(MT_EFORMAT, "tokenizer '%s' has no piece for a newline (train it with "
                       "byte fallback, as meshtrain tokenize does), so the lines of a text "
                       "cannot be joined", tok->path);
    mt__raw_text raw = {0};
    FILE *copy = NULL;
    mt_status s = mt__raw_scan(tok, in_fd, NULL, &raw);
    if (s == MT_OK && raw.n_run > 0) {
        if (!(copy = tmpfile()))
            s = mt_fail(MT_EIO, "cannot make a temporary file for spm_encode's text: %s",
                        strerror(errno));
        if (s == MT_OK) s = mt__raw_scan(tok, in_fd, copy, &raw);
        if (s == MT_OK && fflush(copy) != 0)
            s = mt_fail(MT_EIO, "writing the text for spm_encode to a temporary file: %s",
                        strerror(errno));
    }
    id_list l = {0};
    int fd = copy ? fileno(copy) : in_fd;
    if (s == MT_OK) s = encode_whole(tok, fd, &raw, &l);
    if (copy) fclose(copy);
    /* spm_encode ends every line it prints, the last one too */
    if (s == MT_OK && !raw.ends_in_newline && l.n > 0 && l.v[l.n - 1] == tok->newline) l.n--;
    mt__raw_free(&raw);
    if (s != MT_OK) {
        free(l.v);
        return s;
    }
    *ids = l.v ? l.v : malloc(sizeof(int32_t));   /* an empty text: a valid empty array */
    *n = l.n;
    if (!*ids) return mt_fail(MT_ENOMEM, "no memory for an empty array of ids");
    return MT_OK;
}

mt_status mt_tokenizer_encode_file(const mt_tokenizer *tok, const char *text_path, int32_t **ids,
                                   int64_t *n) {
    if (!tok || !text_path || !ids || !n)
        return mt_fail(MT_EINVAL, "mt_tokenizer_encode_file needs a tokenizer, a path and "
                       "outputs");
    FILE *f;
    int64_t size = 0;
    mt_status s;
    if (tok->bpe) {   /* byte-level BPE encodes in this process, the whole text at once */
        char *text = NULL;
        size_t len = 0;
        if ((s = mt_input_read_all(text_path, "text", 0, &text, &len)) != MT_OK) return s;
        s = mt__bpe_encode(tok->bpe, text, len, ids, n);
        free(text);
        return s;
    }
    if ((s = mt_input_open(text_path, "text", 0, &f, &size)) != MT_OK) return s;
    s = encode_fd(tok, fileno(f), ids, n);
    fclose(f);
    return s;
}

mt_status mt_tokenizer_encode(const mt_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, int64_t *n) {
    if (!tok || (len > 0 && !text) || !ids || !n)
        return mt_fail(MT_EINVAL, "mt_tokenizer_encode needs a tokenizer, the text and outputs");
    if (tok->bpe) return mt__bpe_encode(tok->bpe, len ? text : "", len, ids, n);
    FILE *f = tmpfile();
    if (!f) return mt_fail(MT_EIO, "cannot make a temporary file for the text: %s",
                           strerror(errno));
    mt_status s;
    if (fwrite(text, 1, len, f) != len || fflush(f) != 0)
        s = mt_fail(MT_EIO, "writing the text to a temporary file: %s", strerror(errno));
    else
        s = encode_fd(tok, fileno(f), ids, n);
    fclose(f);
    return s;
}
