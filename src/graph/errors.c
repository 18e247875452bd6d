/*
 * errors.c — a graph's sticky error: the first build or compile failure,
 * kept with its message so that a chain of builder calls is checked once.
 */
#include "graph/graph_impl.h"

#include <stdarg.h>
#include <stdio.h>

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
