/* status.c — status codes and the per-thread error message. */
#include "meshtrain.h"

#include <stdarg.h>
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

mt_status mt_fail(mt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    return code;
}
