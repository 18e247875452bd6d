/*
 * errors.c — a graph's sticky error: the first build or compile failure,
 * kept with its message so that a chain of builder calls is checked once;
 * and how messages name a tensor the graph named itself ("act.13"): by the
 * op that made it and that op's operands.
 */
#include "graph/graph_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

/* Records the first error in g and (re)raises g's error as mt_errmsg(). The
 * arguments may include mt_errmsg() itself: it is read before mt_fail
 * replaces it. */
static void graph_verror(mt_graph *g, mt_status code, const char *fmt, va_list ap) {
    if (g->status == MT_OK) {
        vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
        g->status = code;
    }
    mt_fail(g->status, "%s", g->errmsg);
}

mt_tensor *mt__graph_error(mt_graph *g, mt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    graph_verror(g, code, fmt, ap);
    va_end(ap);
    return NULL;
}

mt_status mt_graph_fail(mt_graph *g, mt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    graph_verror(g, code, fmt, ap);
    va_end(ap);
    return code;
}

mt_status mt_graph_status(const mt_graph *g) { return g->status; }
const char *mt_graph_errmsg(const mt_graph *g) { return g->errmsg; }

/* ======================================================================== */
/* Naming tensors in messages                                                */
/* ======================================================================== */

/* Whether t carries the graph's own name, "<kind>.<id>" ("act.13"), rather
 * than one a user or a builder chose: such a name means nothing to the
 * reader of a message. */
static bool generated_name(const mt_tensor *t) {
    static const char *const prefixes[] = {"input", "param", "act", "grad", "aux", "const"};
    const char *dot = strrchr(t->name, '.');
    if (!dot || !dot[1]) return false;
    char *end;
    long id = strtol(dot + 1, &end, 10);
    if (*end || id != t->id) return false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strlen(prefixes[i]) == (size_t)(dot - t->name) &&
            !strncmp(t->name, prefixes[i], (size_t)(dot - t->name)))
            return true;
    return false;
}

/* The forward node that makes t in g, or NULL (a leaf, a view, or another
 * graph's tensor). */
static const mt_op_call *producer(const mt_graph *g, const mt_tensor *t) {
    for (int i = 0; g && i < g->n_forward; i++)
        if (g->nodes[i].call.out == t) return &g->nodes[i].call;
    return NULL;
}

/* Appends t's label to buf at *at (bounded); `depth` levels of producers
 * are spelt out below a generated name. */
static void label(const mt_graph *g, const mt_tensor *t, int depth, char *buf, size_t n,
                  size_t *at) {
#define PUT(...)                                                                          \
    do {                                                                                  \
        if (*at < n) *at += (size_t)snprintf(buf + *at, n - *at, __VA_ARGS__);            \
    } while (0)
    if (!generated_name(t)) {
        PUT("'%s'", t->name);
        return;
    }
    const mt_tensor *root = t;
    while (root->view_of) root = root->view_of;
    const mt_op_call *c = producer(g, root);
    if (!c || depth <= 0) {
        PUT(c ? "%s(...)" : "'%s'", c ? mt__op_def(c->op)->name : root->name);
        return;
    }
    if (root != t) PUT("reshape of ");
    PUT("%s(", mt__op_def(c->op)->name);
    for (int k = 0; k < c->n_in; k++) {
        if (k) PUT(", ");
        label(g, c->in[k], depth - 1, buf, n, at);
    }
    PUT(")");
#undef PUT
}

const char *mt__tensor_label(const mt_graph *g, const mt_tensor *t, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    if (t) label(g, t, 2, buf, n, &at);
    return buf;
}

const char *mt__call_label(const mt_graph *g, const mt_op_call *c, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "%s of ", mt__op_def(c->op)->name);
    for (int k = 0; k < c->n_in && at < n; k++) {
        if (k) at += (size_t)snprintf(buf + at, n - at, k + 1 == c->n_in ? " and " : ", ");
        if (at < n) label(g, c->in[k], 1, buf, n, &at);
    }
    if (c->out && !generated_name(c->out) && at < n)
        snprintf(buf + at, n - at, " (making '%s')", c->out->name);
    return buf;
}
