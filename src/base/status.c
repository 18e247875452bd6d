/* status.c — status codes and the per-thread error message. */
#include "base/base_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* One message per thread: each device is a thread, and its last failure must
 * not be overwritten by another device's. */
static _Thread_local char errmsg[1024];

const char *mt_status_name(mt_status status) {
    switch (status) {
#define MT__STATUS_NAME(name, value, text) case name: return #name;
        MT_STATUS_TABLE(MT__STATUS_NAME)
#undef MT__STATUS_NAME
    }
    return "MT_E?";
}

const char *mt_status_text(mt_status status) {
    switch (status) {
#define MT__STATUS_TEXT(name, value, text) case name: return text;
        MT_STATUS_TABLE(MT__STATUS_TEXT)
#undef MT__STATUS_TEXT
    }
    return "unknown status";
}

const char *mt_errmsg(void) { return errmsg; }

void mt_errclear(void) { errmsg[0] = '\0'; }

/* Formats into a buffer of its own first, then replaces the message: the
 * arguments may include mt_errmsg() itself. */
mt_status mt_fail(mt_status code, const char *fmt, ...) {
    char msg[sizeof errmsg];
    va_list ap;
    va_start(ap, fmt);
    mt__text_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(errmsg, msg, sizeof errmsg);
    return code;
}

mt_status mt_fail_wrap(mt_status code, const char *fmt, ...) {
    char msg[sizeof errmsg];
    va_list ap;
    va_start(ap, fmt);
    int n = mt__text_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* then ": <old message>", cut to what fits */
    size_t at = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    if (errmsg[0] && at + 2 < sizeof msg) {
        size_t keep = strnlen(errmsg, sizeof errmsg - 1);
        if (keep > sizeof msg - 1 - (at + 2)) keep = sizeof msg - 1 - (at + 2);
        memcpy(msg + at, ": ", 2);
        memcpy(msg + at + 2, errmsg, keep);
        msg[at + 2 + keep] = '\0';
    }
    memcpy(errmsg, msg, sizeof errmsg);
    return code;
}
