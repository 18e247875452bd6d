/*
 * text.c — building short texts (tensor names, mesh specs) piece by piece
 * without printf (base_impl.h). The process links libquadmath (through
 * OpenBLAS's libgfortran), which registers printf specifiers for its
 * __float128 when it loads; from then on every printf-family call of
 * glibc takes its slow positional path, and the names a planner search
 * formats by the million (issue 40) cost it 5 % of its time that way.
 * mt__text_format is snprintf for the plain conversions (%s, %d, ...),
 * written here, and snprintf itself for the rest.
 */
#include "base/base_impl.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void mt__text_put(char *dst, size_t cap, size_t *at, const char *s, size_t most) {
    if (cap == 0) return;
    if (*at < cap - 1) {
        size_t n = strnlen(s, most);
        if (n > cap - 1 - *at) n = cap - 1 - *at;
        memcpy(dst + *at, s, n);
        *at += n;
    }
    dst[*at < cap ? *at : cap - 1] = '\0';
}

void mt__text_put_int(char *dst, size_t cap, size_t *at, long long v) {
    char digits[24];
    int k = sizeof digits - 1;
    digits[k] = '\0';
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do digits[--k] = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) digits[--k] = '-';
    mt__text_put(dst, cap, at, digits + k, sizeof digits);
}

/* ---- a printf for the plain conversions ----------------------------------- */

/* Whether every conversion of fmt is one text_vformat writes itself: %%,
 * %c, %s with or without a precision (%.12s, %.*s), and the integers %d
 * %i %u of no length, l, ll or z. No flags, no widths. */
static bool plain(const char *fmt) {
    for (const char *f = fmt; (f = strchr(f, '%')) != NULL;) {
        f++;
        if (*f == '%') {
            f++;
            continue;
        }
        bool prec = *f == '.';
        if (prec) {
            f++;
            if (*f == '*') f++;
            else while (*f >= '0' && *f <= '9') f++;
        }
        if (prec) {
            if (*f != 's') return false;
        } else if (*f == 'l') {
            f += f[1] == 'l' ? 2 : 1;
            if (*f != 'd' && *f != 'i' && *f != 'u') return false;
        } else if (*f == 'z') {
            f++;
            if (*f != 'u') return false;
        } else if (!strchr("csdiu", *f) || !*f) {
            return false;
        }
        f++;
    }
    return true;
}

/* The text being written: dst (cap bytes) holds what fits, total counts
 * all of it (vsnprintf's return). */
typedef struct {
    char  *dst;
    size_t cap, total;
} out;

static void put(out *o, const char *s, size_t n) {
    if (o->total + 1 < o->cap) {
        size_t room = o->cap - 1 - o->total;
        memcpy(o->dst + o->total, s, n < room ? n : room);
    }
    o->total += n;
}

static void put_digits(out *o, bool neg, unsigned long long u) {
    char digits[24];
    int k = sizeof digits;
    do digits[--k] = (char)('0' + u % 10); while (u /= 10);
    if (neg) digits[--k] = '-';
    put(o, digits + k, sizeof digits - (size_t)k);
}

static void put_signed(out *o, long long v) {
    put_digits(o, v < 0, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v);
}

int mt__text_vformat(char *dst, size_t cap, const char *fmt, va_list ap) {
    if (!plain(fmt)) return vsnprintf(dst, cap, fmt, ap);
    out o = {dst, cap, 0};
    for (const char *f = fmt; *f;) {
        const char *pct = strchr(f, '%');
        if (!pct) {
            put(&o, f, strlen(f));
            break;
        }
        put(&o, f, (size_t)(pct - f));
        f = pct + 1;
        long prec = -1;
        if (*f == '.') {
            f++;
            if (*f == '*') {
                prec = va_arg(ap, int);
                f++;
            } else {
                for (prec = 0; *f >= '0' && *f <= '9'; f++) prec = prec * 10 + (*f - '0');
            }
        }
        int l = 0;
        for (; *f == 'l'; f++) l++;
        const bool z = *f == 'z';
        f += z;
        const char c = *f++;
        if (c == '%') {
            put(&o, "%", 1);
        } else if (c == 'c') {
            const char ch = (char)va_arg(ap, int);
            put(&o, &ch, 1);
        } else if (c == 's') {
            const char *s = va_arg(ap, const char *);
            if (!s) s = prec < 0 || prec >= 6 ? "(null)" : "";   /* glibc's */
            put(&o, s, prec < 0 ? strlen(s) : strnlen(s, (size_t)prec));
        } else if (c == 'u') {
            put_digits(&o, false, z ? va_arg(ap, size_t) : l == 2 ? va_arg(ap, unsigned long long)
                                  : l == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned));
        } else {   /* d, i */
            put_signed(&o, l == 2 ? va_arg(ap, long long) : l == 1 ? va_arg(ap, long)
                                                                  : va_arg(ap, int));
        }
    }
    if (cap) dst[o.total < cap ? o.total : cap - 1] = '\0';
    return (int)o.total;
}

int mt__text_format(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = mt__text_vformat(dst, cap, fmt, ap);
    va_end(ap);
    return n;
}
