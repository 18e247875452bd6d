/*
 * test_shard_typed.c — host arrays of every dtype on the mesh
 * (mt_shard_put_typed / mt_shard_gather_typed).
 *
 *  - i32 token ids past 2^24 (16777217 and up, which a float rounds to a
 *    neighbour), negative ids and INT32_MIN/MAX, and bf16 bit patterns
 *    (subnormals, -0, infinities, NaNs with payloads: every pattern of the
 *    high byte) round-trip bit for bit over meshes of 1, 2, 4, 2x2, 2x3 and
 *    2x2x2 devices, with dims split over one axis, over two, and
 *    replicated, 0-D to 4-D.
 *  - each device's shard is checked against a naive index computation
 *    written here: every global element is assigned to a block per dim
 *    (index / local size) and compared with the device's own block, from
 *    its coordinates, so the local offset comes from a different formula
 *    than the library's copy loops.
 *  - partial sums in i32: the parts add up exactly past 2^24; in bf16 the
 *    one part held (zeros elsewhere) comes back bit for bit.
 *  - the f32 forms are the typed ones with MT_F32 (same bits).
 *  - an unknown dtype is refused naming it, before any collective.
 *
 * Every launch has a short collective timeout so a hang fails the case.
 */
#include "meshtrain.h"
#include "harness.h"
#include "shard_helpers.h"
#include "train_helpers.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    const mt_test_shard_case *c;
    mt_dtype                  dtype;
} typed_arg;

/* Element i of the host array, as raw bits of the dtype's size. i32: ids
 * from 2^24 + 1 up in odd steps (none of them a float), with INT32_MIN,
 * INT32_MAX and negative ones mixed in; bf16: the 16-bit pattern i·157 + 1
 * (157 is odd, so 65536 consecutive elements take every pattern once).
 * f32: patterns past 2^24 too, as bits. */
static uint32_t value_bits(mt_dtype dtype, int64_t i) {
    switch (dtype) {
    case MT_I32:
        if (i % 7 == 3) return (uint32_t)INT32_MIN;
        if (i % 7 == 5) return (uint32_t)INT32_MAX;
        if (i % 7 == 6) return (uint32_t)(-(int32_t)(16777217 + 2 * i));
        return (uint32_t)(16777217 + 2 * i);
    case MT_BF16: return (uint32_t)((i * 157 + 1) & 0xffff);
    default:      return 0x4b800001u + (uint32_t)i;   /* 16777218.0f and up, exact as bits */
    }
}

static void put_elem(void *a, mt_dtype dtype, int64_t i, uint32_t bits) {
    if (dtype == MT_BF16) {
        uint16_t h = (uint16_t)bits;
        memcpy((char *)a + i * 2, &h, 2);
    } else {
        memcpy((char *)a + i * 4, &bits, 4);
    }
}

static uint32_t get_elem(const void *a, mt_dtype dtype, int64_t i) {
    if (dtype == MT_BF16) {
        uint16_t h;
        memcpy(&h, (const char *)a + i * 2, 2);
        return h;
    }
    uint32_t u;
    memcpy(&u, (const char *)a + i * 4, 4);
    return u;
}

/* Checks the device's shard against the global array: every global element
 * whose per-dim block is the device's must sit at its offset in the block. */
static mt_status check_shard(const typed_arg *ta, const mt_mesh *mesh, const mt_sharding *sh,
                             int device, const void *global, const void *local) {
    const mt_test_shard_case *c = ta->c;
    int64_t parts[MT_MAX_DIMS], block[MT_MAX_DIMS], lsize[MT_MAX_DIMS];
    mt_test_shard_blocks(mesh, sh, c->ndim, device, parts, block);
    for (int d = 0; d < c->ndim; d++) lsize[d] = c->shape[d] / parts[d];
    const int64_t n = mt_test_numel(c->ndim, c->shape);
    int64_t seen = 0;
    for (int64_t g = 0; g < n; g++) {
        int64_t idx[MT_MAX_DIMS], rem = g;
        for (int d = c->ndim - 1; d >= 0; d--) { idx[d] = rem % c->shape[d]; rem /= c->shape[d]; }
        bool mine = true;
        for (int d = 0; d < c->ndim; d++) mine = mine && idx[d] / lsize[d] == block[d];
        if (!mine) continue;
        int64_t loff = 0;
        for (int d = 0; d < c->ndim; d++) loff = loff * lsize[d] + idx[d] % lsize[d];
        seen++;
        const uint32_t want = get_elem(global, ta->dtype, g), got = get_elem(local, ta->dtype, loff);
        if (got != want)
            return mt_fail(MT_EINTERNAL, "%s on mesh %s spec '%s': device %d local[%lld] = 0x%x, "
                           "want global[%lld] = 0x%x", mt_dtype_name(ta->dtype), c->mesh, c->spec,
                           device, (long long)loff, got, (long long)g, want);
    }
    if (seen != mt_test_numel(c->ndim, lsize))
        return mt_fail(MT_EINTERNAL, "%s on mesh %s spec '%s': device %d holds %lld elements, the "
                       "blocks say %lld", mt_dtype_name(ta->dtype), c->mesh, c->spec, device,
                       (long long)mt_test_numel(c->ndim, lsize), (long long)seen);
    return MT_OK;
}

static mt_status round_trip_device(mt_ctx *ctx, void *arg) {
    const typed_arg *ta = arg;
    const mt_test_shard_case *c = ta->c;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_sharding sh;
    mt_status s = mt_sharding_parse(mesh, c->spec, c->ndim, &sh);
    if (s != MT_OK) return s;
    int64_t lshape[MT_MAX_DIMS];
    if ((s = mt_sharding_local_shape(mesh, &sh, c->ndim, c->shape, lshape)) != MT_OK) return s;
    const size_t es = mt_dtype_size(ta->dtype);
    const int64_t n = mt_test_numel(c->ndim, c->shape), ln = mt_test_numel(c->ndim, lshape);
    char *global = malloc((size_t)(n + 1) * es), *back = malloc((size_t)(n + 1) * es);
    char *local = malloc((size_t)(ln + 1) * es);
    for (int64_t i = 0; i < n; i++) put_elem(global, ta->dtype, i, value_bits(ta->dtype, i));
    memset(back, 0xa5, (size_t)(n + 1) * es);
    s = mt_shard_put_typed(ctx, &sh, ta->dtype, global, c->ndim, c->shape, local);
    if (s == MT_OK) s = check_shard(ta, mesh, &sh, mt_ctx_device(ctx), global, local);
    if (s == MT_OK) s = mt_shard_gather_typed(ctx, &sh, ta->dtype, local, c->ndim, c->shape, back);
    if (s == MT_OK && memcmp(back, global, (size_t)n * es) != 0) {
        int64_t i = 0;
        while (get_elem(back, ta->dtype, i) == get_elem(global, ta->dtype, i)) i++;
        s = mt_fail(MT_EINTERNAL, "%s on mesh %s spec '%s': gathered[%lld] = 0x%x, want 0x%x",
                    mt_dtype_name(ta->dtype), c->mesh, c->spec, (long long)i,
                    get_elem(back, ta->dtype, i), get_elem(global, ta->dtype, i));
    }
    free(local);
    free(back);
    free(global);
    return s;
}

static const mt_test_shard_case CASES[] = {
    {"data=1", 1, "", 0, {0}},
    {"data=1", 1, "data", 1, {9}},
    {"data=2", 2, "data", 1, {10}},
    {"data=2", 2, "_,data", 2, {3, 8}},
    {"data=4", 4, "data,_", 2, {8, 5}},
    {"data=4", 4, "_,_,data", 3, {2, 3, 8}},
    {"data=4", 4, "_", 1, {7}},                              /* replicated */
    {"data=2,tensor=2", 4, "data,tensor", 2, {4, 6}},
    {"data=2,tensor=2", 4, "tensor,data", 2, {6, 4}},
    {"data=2,tensor=2", 4, "data+tensor,_", 2, {8, 3}},
    {"data=2,tensor=2", 4, "_,data,_,tensor", 4, {2, 4, 3, 2}},
    {"data=2,tensor=3", 6, "data,tensor", 2, {4, 9}},
    {"data=2,tensor=3", 6, "_,data+tensor", 2, {2, 12}},
    {"data=2,tensor=3", 6, "tensor,_", 2, {6, 5}},           /* replicated over data */
    {"data=2,fsdp=2,tensor=2", 8, "data+fsdp,tensor", 2, {8, 4}},
    {"data=2,fsdp=2,tensor=2", 8, "fsdp,_,data+tensor", 3, {4, 3, 8}},
    /* 65536+ elements: every bf16 pattern once, over 4 devices */
    {"data=2,tensor=2", 4, "data,tensor", 2, {256, 258}},
};

static void run_all(mt_dtype dtype) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        typed_arg ta = {&CASES[i], dtype};
        mt_launch_opts o = mt_test_launch_opts(CASES[i].mesh, CASES[i].devices);
        mt_status s = mt_launch(&o, round_trip_device, &ta);
        MT_CHECK(s == MT_OK, "%s, mesh %s, spec '%s', %d-D: %s: %s", mt_dtype_name(dtype),
                 CASES[i].mesh, CASES[i].spec, CASES[i].ndim, mt_status_name(s), mt_errmsg());
    }
}

MT_TEST(i32_token_ids_past_2_24_round_trip_exactly) { run_all(MT_I32); }
MT_TEST(bf16_bit_patterns_round_trip_exactly) { run_all(MT_BF16); }
MT_TEST(f32_typed_round_trips_exactly) { run_all(MT_F32); }

/* The values are really ones a float cannot carry: the test would pass for
 * nothing if they were. */
MT_TEST(the_i32_ids_are_not_floats) {
    int past = 0;
    for (int64_t i = 0; i < 64; i++) {
        int32_t v = (int32_t)value_bits(MT_I32, i);
        if ((double)(float)v != (double)v) past++;   /* in double: no out-of-range cast */
    }
    MT_CHECK(past >= 32, "only %d of 64 ids lose bits through a float", past);
}

/* ======================================================================== */
/* Partial sums, the f32 forms, errors                                       */
/* ======================================================================== */

/* mt_test_partial_layout's case: data=2,tensor=2, a (4,6) array split on
 * data, partial over tensor. */
static mt_status partial_device(mt_ctx *ctx, void *arg) {
    const mt_dtype dtype = *(const mt_dtype *)arg;
    const int64_t shape[2] = {4, 6};
    mt_sharding sh;
    int t, P, dr;
    mt_status s = mt_test_partial_layout(ctx, &sh, &t, &P, &dr);
    if (s != MT_OK) return s;
    uint32_t global[24], local[12], back[24];   /* bf16 uses the first half's bytes */
    for (int i = 0; i < 24; i++) put_elem(global, dtype, i, value_bits(dtype, i + 100));
    s = mt_shard_put_typed(ctx, &sh, dtype, global, 2, shape, local);
    for (int i = 0; s == MT_OK && i < 12; i++) {
        uint32_t want = t == 0 ? get_elem(global, dtype, dr * 12 + i) : 0;
        if (get_elem(local, dtype, i) != want)
            s = mt_fail(MT_EINTERNAL, "%s put with partial sums: tensor rank %d local[%d] = 0x%x, "
                        "want 0x%x", mt_dtype_name(dtype), t, i, get_elem(local, dtype, i), want);
    }
    /* i32: parts that add up (wrapping as unsigned) to the value, each past
     * 2^24; bf16: the value on rank 0 and zeros, as put leaves them (the
     * patterns of elements 100..123 are positive normal numbers, which a
     * sum with +0 in f32 keeps: not -0 or a signalling NaN) */
    if (dtype == MT_I32)
        for (int i = 0; i < 12; i++) {
            uint32_t v = get_elem(global, dtype, dr * 12 + i), part = 33554433u;
            put_elem(local, dtype, i, t == 0 ? v - part * (uint32_t)(P - 1) : part);
        }
    if (s == MT_OK) s = mt_shard_gather_typed(ctx, &sh, dtype, local, 2, shape, back);
    for (int i = 0; s == MT_OK && i < 24; i++)
        if (get_elem(back, dtype, i) != get_elem(global, dtype, i))
            s = mt_fail(MT_EINTERNAL, "%s partial gather[%d] = 0x%x, want 0x%x",
                        mt_dtype_name(dtype), i, get_elem(back, dtype, i),
                        get_elem(global, dtype, i));
    return s;
}

/* (test_shard.c covers f32 partial sums) */
MT_TEST(partial_sums_add_up_in_the_dtype) {
    const mt_dtype dtypes[2] = {MT_I32, MT_BF16};
    for (int k = 0; k < 2; k++) {
        mt_dtype dt = dtypes[k];
        mt_launch_opts o = mt_test_launch_opts("data=2,tensor=2", 4);
        mt_status s = mt_launch(&o, partial_device, &dt);
        MT_CHECK(s == MT_OK, "%s: %s: %s", mt_dtype_name(dt), mt_status_name(s), mt_errmsg());
    }
}

/* The float forms give the typed form's bits for MT_F32. */
static mt_status float_forms_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_sharding sh;
    mt_status s = mt_sharding_parse(mt_ctx_mesh(ctx), "_,data", 2, &sh);
    if (s != MT_OK) return s;
    const int64_t shape[2] = {3, 4};
    float global[12], a[6], b[6], ga[12], gb[12];
    for (int i = 0; i < 12; i++) {
        uint32_t u = value_bits(MT_F32, i);
        memcpy(&global[i], &u, 4);
    }
    if ((s = mt_shard_put(ctx, &sh, global, 2, shape, a)) != MT_OK) return s;
    if ((s = mt_shard_put_typed(ctx, &sh, MT_F32, global, 2, shape, b)) != MT_OK) return s;
    if (memcmp(a, b, sizeof a) != 0) return mt_fail(MT_EINTERNAL, "mt_shard_put differs");
    if ((s = mt_shard_gather(ctx, &sh, a, 2, shape, ga)) != MT_OK) return s;
    if ((s = mt_shard_gather_typed(ctx, &sh, MT_F32, b, 2, shape, gb)) != MT_OK) return s;
    if (memcmp(ga, gb, sizeof ga) != 0 || memcmp(ga, global, sizeof ga) != 0)
        return mt_fail(MT_EINTERNAL, "mt_shard_gather differs");
    return MT_OK;
}

MT_TEST(float_forms_are_the_typed_ones) {
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, float_forms_device, NULL));
}

typedef struct {
    mt_test_kept put, gather;
} dtype_errors;

static mt_status bad_dtype_device(mt_ctx *ctx, void *arg) {
    dtype_errors *r = arg;
    mt_sharding sh;
    memset(&sh, 0, sizeof sh);
    const int64_t shape[1] = {4};
    int32_t g[4] = {0}, l[4];
    mt_test_keep(ctx, mt_shard_put_typed(ctx, &sh, (mt_dtype)7, g, 1, shape, l), &r->put);
    mt_test_keep(ctx, mt_shard_gather_typed(ctx, &sh, (mt_dtype)-1, l, 1, shape, g), &r->gather);
    return MT_OK;
}

MT_TEST(an_unknown_dtype_is_refused_naming_it) {
    dtype_errors r;
    memset(&r, 0, sizeof r);
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, bad_dtype_device, &r));
    MT_CHECK(r.put.status == MT_EINVAL, "put of dtype 7: %s", mt_status_name(r.put.status));
    MT_CHECK(strstr(r.put.msg, "mt_shard_put_typed") && strstr(r.put.msg, "dtype 7") &&
             strstr(r.put.msg, "MT_I32"), "the message names the call, the dtype and the choices: "
             "'%s'", r.put.msg);
    MT_CHECK(r.gather.status == MT_EINVAL, "gather of dtype -1: %s",
             mt_status_name(r.gather.status));
    MT_CHECK(strstr(r.gather.msg, "mt_shard_gather_typed") && strstr(r.gather.msg, "dtype -1"),
             "message: '%s'", r.gather.msg);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
