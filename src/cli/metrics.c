/*
 * metrics.c — `train --metrics FILE`: one JSON object per step.
 *
 * Each line is formatted whole and written with one write(2), not through
 * stdio, so that a failed write loses exactly one line and the error comes
 * back with the step it belongs to; a partial write (the disk filled in the
 * middle of a line) is cut off again with ftruncate, so every line in the
 * file is a whole one. A resume first drops the lines past the checkpoint's
 * step: they belong to steps the resumed run takes again.
 */
#include "cli/args.h"
#include "cli/train_run.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ======================================================================== */
/* Open: a new log, or the log of the run a resume continues                 */
/* ======================================================================== */

/* Finds where the lines past step `start` begin in the log at `path`: the
 * first line with a larger step, or a last line without its newline (torn by
 * a kill). Sets *cut to that offset (-1: keep everything) and counts the
 * lines kept and dropped: everything from the cut on is dropped. */
static int find_cut(cli_metrics *m, int start, off_t *cut) {
    *cut = -1;
    FILE *f = fopen(m->path, "rb");
    if (!f) {
        if (errno == ENOENT) return CLI_EXIT_OK;   /* a resume may start a new log */
        cli_error("--metrics '%s': cannot read it: %s", m->path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    off_t at = 0;
    long lineno = 0;
    int rc = CLI_EXIT_OK;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (*cut >= 0) { m->dropped++; continue; }   /* everything after the cut goes */
        int step;
        if (line[len - 1] != '\n') { *cut = at; m->dropped++; continue; }
        if (sscanf(line, "{\"step\":%d", &step) != 1) {
            cli_error("--metrics '%s': line %ld is not a meshtrain metrics line; a resume "
                      "keeps the lines of its log up to the checkpoint's step %d and drops the "
                      "rest, so it continues only a meshtrain log: give the run's log or a new "
                      "file", m->path, lineno, start);
            rc = CLI_EXIT_FAIL;
            break;
        }
        if (step > start) { *cut = at; m->dropped++; continue; }
        m->kept++;
        at += len;
    }
    if (rc == CLI_EXIT_OK && ferror(f)) {
        cli_error("--metrics '%s': cannot read it: %s", m->path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    free(line);
    fclose(f);
    return rc;
}

int cli_metrics_open(cli_metrics *m, const char *path, int start) {
    memset(m, 0, sizeof *m);
    m->fd = -1;
    m->path = path;
    if (!path) return CLI_EXIT_OK;
    off_t cut = -1;
    if (start > 0) {
        int rc = find_cut(m, start, &cut);
        if (rc != CLI_EXIT_OK) return rc;
    }
    /* O_NONBLOCK: cli_check_files refused a FIFO, but the path could have
     * become one since; a regular file ignores the flag */
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK;
    m->fd = open(path, flags, 0666);
    if (m->fd < 0) {
        cli_error("cannot open metrics file '%s': %s", path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    /* the log is written in place (so that `tail -f` follows a run), and
     * locked as a claimed output's temporary file is: a second run given
     * the same --metrics is refused before it truncates the first's lines */
    if (flock(m->fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == EWOULDBLOCK)
            cli_error("--metrics '%s': another run is writing it (it is locked by a live "
                      "process); wait for that run to end, or give another name", path);
        else
            cli_error("--metrics '%s': cannot lock it: %s", path, strerror(err));
        close(m->fd);
        m->fd = -1;
        return CLI_EXIT_FAIL;
    }
    if (cut < 0 && start == 0) cut = 0;   /* a new run: the old lines go */
    if (cut >= 0 && ftruncate(m->fd, cut) != 0) {
        cli_error("--metrics '%s': cannot drop the lines past step %d: %s", path, start,
                  strerror(errno));
        close(m->fd);
        m->fd = -1;
        return CLI_EXIT_FAIL;
    }
    m->good = lseek(m->fd, 0, SEEK_END);
    return CLI_EXIT_OK;
}

/* ======================================================================== */
/* Lines                                                                     */
/* ======================================================================== */

/* Appends "key":value to buf at *at; JSON has no NaN or infinity, and null
 * keeps every line parseable. */
static void json_num(char *buf, size_t n, size_t *at, const char *key, double v, bool comma) {
    if (*at >= n) return;
    int w = isfinite(v) ? snprintf(buf + *at, n - *at, "\"%s\":%.7g%s", key, v, comma ? "," : "")
                        : snprintf(buf + *at, n - *at, "\"%s\":null%s", key, comma ? "," : "");
    if (w > 0) *at += (size_t)w;
}

/* Writes all n bytes, or fails with errno set. */
static bool write_all(int fd, const char *p, size_t n, size_t *done) {
    *done = 0;
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (w == 0) { errno = EIO; return false; }
        *done += (size_t)w;
    }
    return true;
}

void cli_metrics_log(cli_metrics *m, const mt_step_report *r, float val, double tps,
                     double gflops) {
    if (m->fd < 0) return;
    char line[1024];
    size_t at = (size_t)snprintf(line, sizeof line, "{\"step\":%d,", r->step);
    json_num(line, sizeof line, &at, "loss", r->loss, true);
    if (!isnan(val)) json_num(line, sizeof line, &at, "val_loss", val, true);
    json_num(line, sizeof line, &at, "lr", r->lr, true);
    json_num(line, sizeof line, &at, "grad_norm", r->grad_norm, true);
    if (!isnan(r->moe_maxvio)) json_num(line, sizeof line, &at, "moe_maxvio", r->moe_maxvio, true);
    if (!isnan(r->moe_dropped))
        json_num(line, sizeof line, &at, "moe_dropped", r->moe_dropped, true);
    if (!isnan(r->moe_aux)) json_num(line, sizeof line, &at, "moe_aux", r->moe_aux, true);
    json_num(line, sizeof line, &at, "tokens_per_s", tps, true);
    json_num(line, sizeof line, &at, "gflops", gflops, true);
    if (!isnan(r->bubble_rate)) {   /* a pipeline */
        json_num(line, sizeof line, &at, "bubble_rate", r->bubble_rate, true);
        json_num(line, sizeof line, &at, "bubble_predicted", r->bubble_predicted, true);
    }
    if (r->comm.n_collectives > 0) {   /* on a mesh: device 0's, in elements (train.h) */
        json_num(line, sizeof line, &at, "param_gather", r->comm.param_gather, true);
        json_num(line, sizeof line, &at, "grad_scatter", r->comm.grad_scatter, true);
        json_num(line, sizeof line, &at, "grad_reduce", r->comm.grad_reduce, true);
        json_num(line, sizeof line, &at, "param_gather_bytes", r->comm.param_gather_bytes, true);
        json_num(line, sizeof line, &at, "grad_scatter_bytes", r->comm.grad_scatter_bytes, true);
        json_num(line, sizeof line, &at, "grad_reduce_bytes", r->comm.grad_reduce_bytes, true);
        json_num(line, sizeof line, &at, "comm_bytes",
                 r->comm.param_gather_bytes + r->comm.grad_scatter_bytes +
                     r->comm.grad_reduce_bytes + r->comm.other_bytes, true);
        json_num(line, sizeof line, &at, "psi", r->psi, true);
    }
    json_num(line, sizeof line, &at, "ms", r->seconds * 1e3, false);
    if (at + 2 >= sizeof line) at = sizeof line - 3;   /* cannot happen: 18 short numbers */
    line[at++] = '}';
    line[at++] = '\n';

    size_t done;
    if (write_all(m->fd, line, at, &done)) {
        m->good += (off_t)at;
        m->written++;
        return;
    }
    int err = errno;
    /* the disk filled in the middle of the line: the log keeps whole lines */
    if (done > 0 && ftruncate(m->fd, m->good) != 0) m->good += (off_t)done;
    if (m->lost++ == 0) {
        m->err = err;
        m->first_lost_step = r->step;
    }
}

int cli_metrics_close(cli_metrics *m) {
    if (m->fd < 0) return CLI_EXIT_OK;
    int rc = CLI_EXIT_OK;
    if (close(m->fd) != 0 && m->lost == 0) {
        cli_error("cannot write metrics file '%s': %s", m->path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    m->fd = -1;
    if (m->lost > 0) {
        cli_error("--metrics '%s': %d of %d lines were lost, the first at step %d: %s; "
                  "training went on", m->path, m->lost, m->lost + m->written,
                  m->first_lost_step, strerror(m->err));
        rc = CLI_EXIT_FAIL;
    }
    return rc;
}
