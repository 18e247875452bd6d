/*
 * test_tensor.c — the tensor layer: dtype sizes and names, bf16 rounding
 * against hand-worked bit patterns, partition specs read and written back,
 * local shapes, printed types against hand-written strings, and a partitioned
 * graph's local (mt_tensor_dim) and global (mt_tensor_global_dim) sizes
 * against shapes and axis sizes written out by hand.
 */
#include "harness.h"
#include "meshtrain.h"
#include "tensor/tensor_impl.h"

static mt_mesh *make(const char *spec, int n) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    return m;
}

MT_TEST(dtype_sizes_and_names) {
    MT_CHECK(mt_dtype_size(MT_F32) == 4 && mt_dtype_size(MT_BF16) == 2 && mt_dtype_size(MT_I32) == 4,
             "sizes");
    MT_CHECK(mt_dtype_size((mt_dtype)7) == 0, "unknown dtype has size 0");
    MT_CHECK(strcmp(mt_dtype_name(MT_F32), "f32") == 0 && strcmp(mt_dtype_name(MT_BF16), "bf16") == 0 &&
             strcmp(mt_dtype_name(MT_I32), "i32") == 0, "names");
    MT_CHECK(strcmp(mt_dtype_name((mt_dtype)7), "?") == 0, "unknown dtype name");
}

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* Round to nearest even on the 16 dropped bits, worked by hand. */
MT_TEST(bf16_rounds_to_nearest_even_and_keeps_nan) {
    struct { uint32_t f32; uint16_t bf16; const char *what; } table[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0x3f808000u, 0x3f80, "halfway, even below: down"},
        {0x3f818000u, 0x3f82, "halfway, odd below: up"},
        {0x3f808001u, 0x3f81, "above halfway: up"},
        {0x3f807fffu, 0x3f80, "below halfway: down"},
        {0x7f7fffffu, 0x7f80, "largest float rounds to inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0x7f800001u, 0x7fc0, "signalling NaN stays NaN (quieted)"},
        {0x80000000u, 0x8000, "-0"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint16_t h = mt__f32_to_bf16_1(from_bits(table[i].f32));
        MT_CHECK(h == table[i].bf16, "%s: %08x -> %04x, want %04x", table[i].what, table[i].f32, h,
                 table[i].bf16);
    }
    /* the array forms agree with the scalar ones, across the vector blocks and the tail */
    float f[37], back[37];
    uint16_t h[37];
    for (int i = 0; i < 37; i++) f[i] = (float)i * 0.37f - 5.0f;
    mt__f32_to_bf16(h, f, 37);
    mt__bf16_to_f32(back, h, 37);
    for (int i = 0; i < 37; i++) {
        MT_CHECK(h[i] == mt__f32_to_bf16_1(f[i]), "element %d", i);
        MT_CHECK(back[i] == mt__bf16_to_f32_1(h[i]), "element %d back", i);
        MT_CHECK(fabsf(back[i] - f[i]) <= fabsf(f[i]) / 256, "element %d within bf16 precision", i);
    }
}

MT_TEST(sharding_parse_and_local_shape) {
    mt_mesh *m = make("data=2,tensor=3", 6);
    mt_sharding sh;
    MT_CHECK_OK(mt_sharding_parse(m, "data,_", 2, &sh));
    MT_CHECK(sh.dim_axes[0] == 1 && sh.dim_axes[1] == 0 && sh.partial_axes == 0, "data,_");
    MT_CHECK_OK(mt_sharding_parse(m, "tensor,data", 2, &sh));
    MT_CHECK(sh.dim_axes[0] == 2 && sh.dim_axes[1] == 1, "tensor,data");
    MT_CHECK_OK(mt_sharding_parse(m, "_,data+tensor", 2, &sh));
    MT_CHECK(sh.dim_axes[0] == 0 && sh.dim_axes[1] == 3, "_,data+tensor");
    MT_CHECK_OK(mt_sharding_parse(m, "data", 3, &sh));
    MT_CHECK(sh.dim_axes[0] == 1 && sh.dim_axes[1] == 0 && sh.dim_axes[2] == 0, "trailing dims whole");
    MT_CHECK_OK(mt_sharding_parse(m, "", 2, &sh));
    MT_CHECK(sh.dim_axes[0] == 0 && sh.dim_axes[1] == 0, "replicated");

    MT_CHECK_FAILS(mt_sharding_parse(m, "pipe,_", 2, &sh), MT_EINVAL, "'pipe'", "'data'");
    MT_CHECK_FAILS(mt_sharding_parse(m, "data,data", 2, &sh), MT_EINVAL, "'data'", "twice");
    MT_CHECK_FAILS(mt_sharding_parse(m, "data,_,_", 2, &sh), MT_EINVAL, "2 dims");
    MT_CHECK_FAILS(mt_sharding_parse(m, "data,,_", 3, &sh), MT_EINVAL, "dim 1");

    int64_t global[3] = {4, 9, 5}, local[3];
    MT_CHECK_OK(mt_sharding_parse(m, "data,tensor,_", 3, &sh));
    MT_CHECK_OK(mt_sharding_local_shape(m, &sh, 3, global, local));
    MT_CHECK(local[0] == 2 && local[1] == 3 && local[2] == 5, "local (%lld,%lld,%lld)",
             (long long)local[0], (long long)local[1], (long long)local[2]);
    int64_t g2[2] = {12, 7}, l2[2];
    MT_CHECK_OK(mt_sharding_parse(m, "data+tensor,_", 2, &sh));
    MT_CHECK_OK(mt_sharding_local_shape(m, &sh, 2, g2, l2));
    MT_CHECK(l2[0] == 2 && l2[1] == 7, "two axes on one dim: %lld", (long long)l2[0]);
    int64_t bad[3] = {5, 9, 5};
    MT_CHECK_OK(mt_sharding_parse(m, "data,tensor,_", 3, &sh));
    MT_CHECK_FAILS(mt_sharding_local_shape(m, &sh, 3, bad, local), MT_ESHAPE, "dim 0", "size 5",
                "by 2", "'data'");
    mt_mesh_free(m);
}

/* What mt_sharding_format writes, mt_sharding_parse reads back to the same sharding. */
MT_TEST(sharding_format_round_trips) {
    mt_mesh *m = make("data=2,fsdp=2,tensor=2", 8);
    const char *specs[][2] = {
        {"data,_", "data,_"},
        {"_,tensor", "_,tensor"},
        {"data+fsdp,tensor", "data+fsdp,tensor"},
        {"fsdp+data,_", "data+fsdp,_"},          /* printed in mesh order, major first */
        {"", "_,_"},
        {"tensor", "tensor,_"},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        mt_sharding sh, again;
        char buf[64];
        MT_CHECK_OK(mt_sharding_parse(m, specs[i][0], 2, &sh));
        size_t n = mt_sharding_format(m, &sh, 2, buf, sizeof buf);
        MT_CHECK(strcmp(buf, specs[i][1]) == 0 && n == strlen(specs[i][1]), "'%s' printed as '%s' (%zu), want '%s'",
                 specs[i][0], buf, n, specs[i][1]);
        MT_CHECK_OK(mt_sharding_parse(m, buf, 2, &again));
        MT_CHECK(memcmp(&sh, &again, sizeof sh) == 0, "'%s' read back differs", buf);
    }
    /* snprintf rules: the length needed comes back, what fits is written and terminated */
    mt_sharding sh;
    MT_CHECK_OK(mt_sharding_parse(m, "data+fsdp,tensor", 2, &sh));
    char small[6];
    size_t need = mt_sharding_format(m, &sh, 2, small, sizeof small);
    MT_CHECK(need == strlen("data+fsdp,tensor") && strcmp(small, "data+") == 0,
             "cut: need %zu, got '%s'", need, small);
    MT_CHECK(mt_sharding_format(m, &sh, 2, NULL, 0) == need, "a NULL buffer only measures");
    sh.dim_axes[0] |= 1u << 5;   /* an axis the mesh does not have */
    char buf[64];
    mt_sharding_format(m, &sh, 2, buf, sizeof buf);
    MT_CHECK(strcmp(buf, "data+fsdp+?,tensor") == 0, "unknown axis: '%s'", buf);
    mt_mesh_free(m);
}

/* The notation of issue 8 (JAX's sharding in types), written out by hand. */
MT_TEST(sharding_type_strings) {
    mt_mesh *m = make("x=2,y=2", 4);
    struct { const char *spec; uint32_t partial; mt_dtype dt; int ndim; int64_t shape[4];
             const char *want; } table[] = {
        {"x,_", 0, MT_F32, 2, {8, 4}, "f32[8@x,4]"},
        {"x+y,_", 0, MT_F32, 2, {8, 4}, "f32[8@x+y,4]"},
        {"", 1, MT_F32, 2, {8, 16}, "f32[8,16]{U:x}"},
        {"_,y", 3, MT_BF16, 2, {8, 16}, "bf16[8,16@y]{U:x+y}"},
        {"", 0, MT_I32, 1, {5}, "i32[5]"},
        {"", 0, MT_F32, 0, {0}, "f32[]"},
        {"y,_,x", 0, MT_F32, 3, {4, 3, 2}, "f32[4@y,3,2@x]"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        mt_sharding sh;
        MT_CHECK_OK(mt_sharding_parse(m, table[i].spec, table[i].ndim, &sh));
        sh.partial_axes = table[i].partial;
        char buf[64];
        size_t n = mt_sharding_type_format(m, table[i].dt, table[i].ndim, table[i].shape, &sh, buf,
                                           sizeof buf);
        MT_CHECK(strcmp(buf, table[i].want) == 0 && n == strlen(buf), "got '%s', want '%s'", buf,
                 table[i].want);
    }
    mt_mesh_free(m);
}

/* ======================================================================== */
/* Local and global sizes                                                    */
/* ======================================================================== */

/* A global graph on mesh data=2,tensor=3 (6 devices): x (4,12) split over
 * data; w (12,6) column-parallel over tensor; u (6,12) row-parallel over
 * tensor; z (24,2) split over data and tensor at once; b (12) replicated.
 * loss = sum(x·w·u) + sum(z) + sum(b). Each leaf's global shape and the
 * parts its dims are cut into are written out here by hand. */
typedef struct {
    const char *name, *spec;
    int         ndim;
    int64_t     global[2];
    int64_t     parts[2];        /* data=2, tensor=3: the product of the dim's axes */
} leaf_case;

static const leaf_case LEAVES[] = {
    {"x", "data,_", 2, {4, 12}, {2, 1}},
    {"w", "_,tensor", 2, {12, 6}, {1, 3}},
    {"u", "tensor,_", 2, {6, 12}, {3, 1}},
    {"z", "data+tensor,_", 2, {24, 2}, {6, 1}},
    {"b", "", 1, {12, 0}, {1, 1}},
};
enum { N_LEAVES = sizeof LEAVES / sizeof LEAVES[0] };

static mt_tensor *build_leaves(mt_graph *g, const mt_mesh *mesh) {
    mt_tensor *t[N_LEAVES];
    for (int k = 0; k < N_LEAVES; k++) {
        const leaf_case *c = &LEAVES[k];
        t[k] = k == 0 ? mt_input(g, c->name, MT_F32, c->ndim, c->global)
                      : mt_param(g, c->name, c->ndim, c->global, (mt_init){MT_INIT_NORMAL, 0.1f});
        mt_sharding sh;
        if (!t[k] || mt_sharding_parse(mesh, c->spec, c->ndim, &sh) != MT_OK ||
            mt_tensor_set_sharding(t[k], &sh) != MT_OK)
            return NULL;
    }
    mt_tensor *h = mt_matmul(g, mt_matmul(g, t[0], t[1], false, false), t[2], false, false);
    return mt_add(g, mt_add(g, mt_sum(g, h), mt_sum(g, t[3])), mt_sum(g, t[4]));
}

MT_TEST(dim_is_local_and_global_dim_is_global_on_a_partitioned_graph) {
    mt_mesh *mesh = make("data=2,tensor=3", 6);
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = build_leaves(g, mesh);
    MT_CHECK(loss, "build: %s", mt_errmsg());
    /* the global graph: both queries give the whole size, sharding or not,
     * and a sharded leaf is its own global type (not its shape times the
     * axes: it is already global) */
    for (int k = 0; k < N_LEAVES && loss; k++) {
        mt_tensor *t = mt_graph_find(g, LEAVES[k].name);
        for (int d = 0; d < LEAVES[k].ndim; d++) {
            MT_CHECK(mt_tensor_dim(t, d) == LEAVES[k].global[d] &&
                     mt_tensor_global_dim(t, d) == LEAVES[k].global[d],
                     "global graph: %s dim %d: dim %lld, global_dim %lld, want %lld both",
                     LEAVES[k].name, d, (long long)mt_tensor_dim(t, d),
                     (long long)mt_tensor_global_dim(t, d), (long long)LEAVES[k].global[d]);
        }
        MT_CHECK(mt_tensor_global_dim(t, LEAVES[k].ndim) == 1 && mt_tensor_global_dim(t, -1) == 1,
                 "%s: a dim past ndim (or negative) is 1, as mt_tensor_dim's", LEAVES[k].name);
        mt_type ty = mt_tensor_global_type(t, mesh);
        for (int d = 0; d < LEAVES[k].ndim; d++)
            MT_CHECK(ty.shape[d] == LEAVES[k].global[d], "global graph: the global type of %s: "
                     "dim %d is %lld, want its own %lld", LEAVES[k].name, d,
                     (long long)ty.shape[d], (long long)LEAVES[k].global[d]);
    }
    for (int dev = 0; dev < 6 && loss; dev++) {
        mt_ctx *ctx = NULL;
        MT_CHECK_OK(mt_ctx_virtual_create(mesh, dev, &ctx));
        mt_graph *local = NULL;
        mt_tensor *lloss = NULL;
        mt_status s = mt_partition(g, loss, ctx, &(mt_partition_opts){0}, &local, &lloss);
        MT_CHECK(s == MT_OK, "device %d: partition: %s", dev, mt_errmsg());
        for (int k = 0; k < N_LEAVES && s == MT_OK; k++) {
            const leaf_case *c = &LEAVES[k];
            mt_tensor *t = mt_graph_find(local, c->name);
            MT_CHECK(t, "device %d: no '%s' in the partitioned graph", dev, c->name);
            if (!t) continue;
            for (int d = 0; d < c->ndim; d++) {
                const int64_t want_local = c->global[d] / c->parts[d];
                MT_CHECK(mt_tensor_dim(t, d) == want_local, "device %d: %s dim %d: mt_tensor_dim "
                         "%lld, want the local %lld", dev, c->name, d,
                         (long long)mt_tensor_dim(t, d), (long long)want_local);
                /* the global size, local x the axes' sizes (an input's too) */
                MT_CHECK(mt_tensor_global_dim(t, d) == mt_tensor_dim(t, d) * c->parts[d] &&
                         mt_tensor_global_dim(t, d) == c->global[d],
                         "device %d: %s dim %d: global_dim %lld, want %lld x %lld = %lld", dev,
                         c->name, d, (long long)mt_tensor_global_dim(t, d),
                         (long long)mt_tensor_dim(t, d), (long long)c->parts[d],
                         (long long)c->global[d]);
            }
            MT_CHECK(mt_tensor_global_dim(t, c->ndim) == 1, "%s: past ndim is 1", c->name);
            /* an input's global size, by the route tensor.h points to */
            if (k == 0) {
                mt_type ty = mt_tensor_global_type(t, mesh);
                MT_CHECK(ty.shape[0] == c->global[0] && ty.shape[1] == c->global[1],
                         "device %d: the global type of x is (%lld,%lld), want (4,12)", dev,
                         (long long)ty.shape[0], (long long)ty.shape[1]);
            }
        }
        mt_graph_free(local);
        mt_ctx_virtual_free(ctx);
    }
    mt_graph_free(g);
    mt_mesh_free(mesh);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
