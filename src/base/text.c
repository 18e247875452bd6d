/*
 * text.c — building short texts (tensor names, mesh specs) piece by piece
 * without printf (base_impl.h). The process links libquadmath (through
 * OpenBLAS's libgfortran), which registers printf specifiers for its
 * __float128 when it loads; from then on every printf-family call of
 * glibc takes its slow positional path, and the names a planner search
 * formats by the million (issue 40) cost it 5 % of its time that way.
 */
#include "base/base_impl.h"

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
