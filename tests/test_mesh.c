/*
 * test_mesh.c — device meshes: spec parsing and its errors, coordinates,
 * groups against hand-written tables, hand-made axes checked, axis-name sets
 * (mt_mesh_axis_set) against hand-computed bit sets.
 */
#include "harness.h"
#include "meshtrain.h"

static mt_mesh *make(const char *spec, int n) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    return m;
}

MT_TEST(mesh_parse) {
    mt_mesh *m = make("data=2,tensor=-1", 6);
    MT_CHECK(mt_mesh_ndim(m) == 2 && mt_mesh_size(m) == 6, "2 axes, 6 devices");
    MT_CHECK(mt_mesh_axis_size(m, "data") == 2 && mt_mesh_axis_size(m, "tensor") == 3,
             "-1 filled in: tensor=%d", mt_mesh_axis_size(m, "tensor"));
    MT_CHECK(mt_mesh_axis_size(m, "pipe") == 0, "no such axis → 0");
    MT_CHECK(strcmp(mt_mesh_spec(m), "data=2,tensor=3") == 0, "spec %s", mt_mesh_spec(m));
    MT_CHECK(strcmp(mt_mesh_axis_name(m, 1), "tensor") == 0, "axis 1 name");
    mt_mesh_free(m);

    m = make("", 4);
    MT_CHECK(mt_mesh_ndim(m) == 1 && strcmp(mt_mesh_spec(m), "d=4") == 0, "empty spec: %s",
             mt_mesh_spec(m));
    mt_mesh_free(m);
    m = make(NULL, 1);
    MT_CHECK(mt_mesh_size(m) == 1, "NULL spec, 1 device");
    mt_mesh_free(m);
    m = make("a=-1", 5);
    MT_CHECK(mt_mesh_axis_size(m, "a") == 5, "lone -1");
    mt_mesh_free(m);
    m = make("x_1=1,y=2,z=-1", 8);
    MT_CHECK(mt_mesh_axis_size(m, "z") == 4 && mt_mesh_axis_size(m, "x_1") == 1, "3 axes");
    mt_mesh_free(m);
}

MT_TEST(mesh_errors) {
    mt_mesh *m = NULL;
    MT_CHECK_FAILS(mt_mesh_create("data=3,tensor=2", 8, &m), MT_EINVAL, "data=3,tensor=2", "6", "8");
    MT_CHECK_FAILS(mt_mesh_create("data=3,tensor=-1", 8, &m), MT_EINVAL, "3", "8", "tensor");
    MT_CHECK_FAILS(mt_mesh_create("data=2,data=2", 4, &m), MT_EINVAL, "'data'", "twice");
    MT_CHECK_FAILS(mt_mesh_create("a=-1,b=-1", 4, &m), MT_EINVAL, "'a'", "'b'");
    MT_CHECK_FAILS(mt_mesh_create("a=0", 4, &m), MT_EINVAL, "'0'", "'a'");
    MT_CHECK_FAILS(mt_mesh_create("a=two", 4, &m), MT_EINVAL, "'two'");
    MT_CHECK_FAILS(mt_mesh_create("data", 4, &m), MT_EINVAL, "'data'", "name=size");
    MT_CHECK_FAILS(mt_mesh_create("da-ta=4", 4, &m), MT_EINVAL, "'da-ta'");
    MT_CHECK_FAILS(mt_mesh_create("a=4,", 4, &m), MT_EINVAL, "','");
    MT_CHECK_FAILS(mt_mesh_create("a=4", 0, &m), MT_EINVAL, "0 devices");
    MT_CHECK_FAILS(mt_mesh_create("a=1,b=1,c=1,d=1,e=1,f=1,g=1", 1, &m), MT_EINVAL, "6 axes");
    MT_CHECK(m == NULL, "out stays NULL on failure");

    m = make("data=2,tensor=2", 4);
    mt_axes ax;
    MT_CHECK_FAILS(mt_mesh_axes(m, "pipe", &ax), MT_EINVAL, "'pipe'", "'data'", "'tensor'");
    MT_CHECK_FAILS(mt_mesh_axes(m, "data,data", &ax), MT_EINVAL, "twice");
    MT_CHECK_FAILS(mt_mesh_axes(m, "data,,tensor", &ax), MT_EINVAL, "empty");
    MT_CHECK_OK(mt_mesh_axes(m, "tensor, data", &ax));
    MT_CHECK(ax.n == 2 && ax.axis[0] == 1 && ax.axis[1] == 0, "order kept");
    MT_CHECK_OK(mt_mesh_axes(m, "", &ax));
    MT_CHECK(ax.n == 0 && mt_mesh_group_size(m, ax) == 1, "no axes: a group of one");
    mt_mesh_free(m);
}

/* Sizes near and over the limits: every axis is read (a second -1 late in
 * the spec is caught), the product in the message is the real one, and a
 * size over the per-axis cap says so. */
MT_TEST(mesh_errors_large_sizes) {
    mt_mesh *m = NULL;
    MT_CHECK_FAILS(mt_mesh_create("a=1048576,b=1048576,c=2", 4, &m), MT_EINVAL,
                "has 2199023255552 devices but 4");
    MT_CHECK_FAILS(mt_mesh_create("a=1048576,b=1048576,c=-1,d=-1", 4, &m), MT_EINVAL,
                "'c' and 'd' are both -1");
    MT_CHECK_FAILS(mt_mesh_create("a=1048576,b=1048576,c=1048576,d=1048576,e=1048576,f=-1", 4, &m),
                MT_EINVAL, "multiply to 1267650600228229401496703205376", "'f=-1'");
    MT_CHECK_FAILS(mt_mesh_create("a=1048577", 1048577, &m), MT_EINVAL, "'1048577'", "limit",
                "1048576");
    MT_CHECK_FAILS(mt_mesh_create("a=99999999999999999999999", 2, &m), MT_EINVAL, "too large",
                "limit");
    MT_CHECK_FAILS(mt_mesh_create("a=-5", 2, &m), MT_EINVAL, "'-5'", "must be a positive integer");
    MT_CHECK(m == NULL, "out stays NULL on failure");
    m = make("a=1048576", 1048576);
    MT_CHECK(mt_mesh_axis_size(m, "a") == 1048576, "the largest axis");
    mt_mesh_free(m);
}

/* The device count of a spec given without one, against the products
 * worked by hand; a product past an int (and past the limit) is refused,
 * not wrapped. */
MT_TEST(mesh_spec_devices) {
    int n = -7;
    MT_CHECK_OK(mt_mesh_spec_devices("data=2,tensor=4", &n));
    MT_CHECK(n == 8, "data=2,tensor=4 -> %d, want 8", n);
    MT_CHECK_OK(mt_mesh_spec_devices("x=1048576", &n));
    MT_CHECK(n == 1048576, "x=1048576 -> %d", n);
    MT_CHECK_FAILS(mt_mesh_spec_devices("data=65536,tensor=65537", &n), MT_EINVAL,
                   "4295032832 devices", "at most 1048576");
    MT_CHECK(n == 0, "out is 0 on failure");
    MT_CHECK_FAILS(mt_mesh_spec_devices("a=1024,b=1025", &n), MT_EINVAL, "1049600 devices");
    MT_CHECK_FAILS(mt_mesh_spec_devices("data=2,tensor=-1", &n), MT_EINVAL, "'tensor'",
                   "number of devices");
    MT_CHECK_FAILS(mt_mesh_spec_devices("data=0", &n), MT_EINVAL, "'data' must be a positive integer",
                   "not '0'");
    MT_CHECK_FAILS(mt_mesh_spec_devices("data", &n), MT_EINVAL, "no size");
    MT_CHECK_FAILS(mt_mesh_spec_devices("", &n), MT_EINVAL, "number of devices");
}

MT_TEST(mesh_coords_round_trip) {
    mt_mesh *m = make("a=2,b=3,c=2", 12);
    for (int d = 0; d < 12; d++) {
        int c[3];
        mt_mesh_coords(m, d, c);
        /* row-major: the last axis varies fastest */
        MT_CHECK(c[0] == d / 6 && c[1] == d / 2 % 3 && c[2] == d % 2, "coords of %d", d);
        MT_CHECK(mt_mesh_device(m, c) == d, "round trip of %d", d);
    }
    mt_mesh_free(m);
}

/* Groups of a 2x3 mesh (x=2, y=3; device = 3x + y), written out by hand. */
MT_TEST(mesh_groups_2x3) {
    mt_mesh *m = make("x=2,y=3", 6);
    static const struct {
        const char *axes;
        int members[6][6];   /* per device: its group, in rank order */
        int rank[6];
        int size;
    } table[] = {
        {"x", {{0, 3}, {1, 4}, {2, 5}, {0, 3}, {1, 4}, {2, 5}}, {0, 0, 0, 1, 1, 1}, 2},
        {"y", {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {3, 4, 5}, {3, 4, 5}, {3, 4, 5}},
         {0, 1, 2, 0, 1, 2}, 3},
        {"x,y", {{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5},
                 {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}},
         {0, 1, 2, 3, 4, 5}, 6},
        /* y major, x minor: rank = 2y + x */
        {"y,x", {{0, 3, 1, 4, 2, 5}, {0, 3, 1, 4, 2, 5}, {0, 3, 1, 4, 2, 5},
                 {0, 3, 1, 4, 2, 5}, {0, 3, 1, 4, 2, 5}, {0, 3, 1, 4, 2, 5}},
         {0, 2, 4, 1, 3, 5}, 6},
        {"", {{0}, {1}, {2}, {3}, {4}, {5}}, {0, 0, 0, 0, 0, 0}, 1},
    };
    for (size_t t = 0; t < sizeof table / sizeof table[0]; t++) {
        mt_axes ax;
        MT_CHECK_OK(mt_mesh_axes(m, table[t].axes, &ax));
        MT_CHECK(mt_mesh_group_size(m, ax) == table[t].size, "size over '%s'", table[t].axes);
        for (int d = 0; d < 6; d++) {
            int members[6];
            int P = mt_mesh_group(m, ax, d, members);
            MT_CHECK(P == table[t].size, "group size over '%s'", table[t].axes);
            for (int r = 0; r < P; r++)
                MT_CHECK(members[r] == table[t].members[d][r], "device %d over '%s': member %d "
                         "is %d, want %d", d, table[t].axes, r, members[r], table[t].members[d][r]);
            MT_CHECK(mt_mesh_group_rank(m, ax, d) == table[t].rank[d], "rank of %d over '%s': "
                     "%d, want %d", d, table[t].axes, mt_mesh_group_rank(m, ax, d), table[t].rank[d]);
            MT_CHECK(members[mt_mesh_group_rank(m, ax, d)] == d, "a device is at its own rank");
        }
    }
    mt_mesh_free(m);
}

MT_TEST(axes_check_names_the_problem) {
    mt_mesh *m = make("data=2,tensor=3", 6);
    mt_axes ok = {2, {1, 0}};
    MT_CHECK_OK(mt_mesh_axes_check(m, ok));
    mt_axes none = {0, {0}};
    MT_CHECK_OK(mt_mesh_axes_check(m, none));
    mt_axes too_many = {3, {0, 1, 0}};
    MT_CHECK_FAILS(mt_mesh_axes_check(m, too_many), MT_EINVAL, "3 axes", "data=2,tensor=3");
    mt_axes unknown = {1, {4}};
    MT_CHECK_FAILS(mt_mesh_axes_check(m, unknown), MT_EINVAL, "axis 4", "does not exist");
    mt_axes twice = {2, {1, 1}};
    MT_CHECK_FAILS(mt_mesh_axes_check(m, twice), MT_EINVAL, "'tensor'", "twice");
    mt_axes negative = {-1, {0}};
    MT_CHECK_FAILS(mt_mesh_axes_check(m, negative), MT_EINVAL, "-1 axes");
    mt_mesh_free(m);
}

/* mt_mesh_axis_set: names → the bit set the partitioner's options take.
 * Mesh "data=2,fsdp=2,tensor=2,seq=1": data is bit 0 (1), fsdp bit 1 (2),
 * tensor bit 2 (4), seq bit 3 (8); the sets below are written out by hand. */
MT_TEST(axis_set_from_names) {
    mt_mesh *m = make("data=2,fsdp=2,tensor=2,seq=1", 8);
    static const struct { const char *names; uint32_t want; } ok[] = {
        {"data", 0x1},           {"fsdp", 0x2},          {"tensor", 0x4},
        {"seq", 0x8},            {"data,fsdp", 0x3},     {"fsdp,data", 0x3},
        {"data+fsdp", 0x3},      {"tensor,data", 0x5},   {" fsdp , tensor ", 0x6},
        {"data,fsdp,tensor,seq", 0xf}, {"seq+tensor,fsdp", 0xe},
        {"", 0x0},               {"   ", 0x0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t bits = 0xdead;
        mt_status s = mt_mesh_axis_set(m, ok[i].names, &bits);
        MT_CHECK(s == MT_OK, "'%s': %s: %s", ok[i].names, mt_status_name(s), mt_errmsg());
        MT_CHECK(bits == ok[i].want, "'%s' gives 0x%x, want 0x%x", ok[i].names, bits, ok[i].want);
    }
    uint32_t bits = 0xdead;
    MT_CHECK_OK(mt_mesh_axis_set(m, NULL, &bits));
    MT_CHECK(bits == 0, "NULL names: 0x%x, want the empty set", bits);
    mt_mesh_free(m);
}

MT_TEST(axis_set_refuses_unknown_and_repeated_names) {
    mt_mesh *m = make("data=2,fsdp=2,tensor=2", 8);
    static const struct { const char *names, *says; } bad[] = {
        {"dta", "no axis 'dta'"},
        {"data,fsdq", "no axis 'fsdq'"},
        {"data,data", "'data' is named twice"},
        {"fsdp+tensor,fsdp", "'fsdp' is named twice"},
        {"data,", "empty axis name"},
        {",data", "empty axis name"},
        {"data,,fsdp", "empty axis name"},
        {"data fsdp", "without a ','"},
        {"Data", "no axis 'Data'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t bits = 0xdead;
        mt_status s = mt_mesh_axis_set(m, bad[i].names, &bits);
        const char *msg = mt_errmsg();
        MT_CHECK(s == MT_EINVAL, "'%s': %s, want MT_EINVAL", bad[i].names, mt_status_name(s));
        MT_CHECK(bits == 0, "'%s': bits 0x%x after a failure, want 0", bad[i].names, bits);
        MT_CHECK(strstr(msg, bad[i].says), "'%s': the message says '%s': '%s'", bad[i].names,
                 bad[i].says, msg);
        MT_CHECK(strstr(msg, "'data', 'fsdp', 'tensor'"), "'%s': the message lists the mesh's "
                 "axes: '%s'", bad[i].names, msg);
    }
    uint32_t bits;
    MT_CHECK_FAILS(mt_mesh_axis_set(NULL, "data", &bits), MT_EINVAL, "mesh is NULL");
    MT_CHECK_FAILS(mt_mesh_axis_set(m, "data", NULL), MT_EINVAL, "bits is NULL");
    mt_mesh_free(m);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
