/*
 * headtail.c — the head-tail layout of a sequence split over devices
 * (../shared/CONTEXT_PARALLEL.md §3; Llama 3 §3.3.2): the sequence of S
 * rows is cut into 2P chunks of c = S/(2P) and device r of P holds chunks r
 * and 2P−1−r, in that order. Causal attention then costs every device the
 * same (2P·c² + c pairs), where contiguous chunks would cost the last
 * device 2P−1 times the first's. The trainer lays its inputs out so, once,
 * and the attention and rope lowerings read a split sequence so.
 */
#include "meshtrain/sharding.h"

int64_t mt_headtail_pos(int64_t i, int64_t local, int parts, int part) {
    if (parts <= 1) return i;
    const int64_t c = local / 2, chunk = i < c ? part : 2 * (int64_t)parts - 1 - part;
    return chunk * c + (i < c ? i : i - c);
}
