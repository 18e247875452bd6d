/*
 * tok_ids.c — the encoders' growing array of token ids (tokenizer_impl.h's
 * mt__ids_append), below every tokenizer file that appends to one.
 */
#include "io/tokenizer_impl.h"

#include <stdlib.h>

bool mt__ids_append(int32_t **v, int64_t *n, int64_t *cap, int32_t id) {
    if (*n == *cap) {
        const int64_t grown = *cap ? 2 * *cap : 1024;
        int32_t *w = realloc(*v, (size_t)grown * sizeof *w);
        if (!w) return false;
        *v = w;
        *cap = grown;
    }
    (*v)[(*n)++] = id;
    return true;
}
