/* test_plan_hardware_files.c — issue 40, item 6: the new chip files, the
 * fabric files and --fabric, and TPU runs as slices of a size given.
 *
 *  - h100-pcie and h100-96gb give their datasheet peaks back: one product of
 *    8192^3 at bf16 takes 2·8192^3 / (peak x 0.8), one streaming op of 1 GB
 *    1e9 / (bandwidth x 0.9), the peaks and bandwidths copied here by hand
 *    from the datasheets (H100 PCIe: 1,513 TFLOPS bf16 with sparsity, 2 TB/s;
 *    GH200's H100 96GB: 990 TFLOPS, 4 TB/s); the PCIe card's levels are an
 *    NVLink bridge pair, a PCIe Gen5 x16 server of 8 and InfiniBand;
 *  - each fabric file replaces h100-sxm's InfiniBand level with its own
 *    figures (200, 400, 100 and 400 Gb/s a NIC, one NIC a GPU), the node
 *    level untouched, and an all-reduce over a data axis of 2 across nodes
 *    takes, by the book's ring form 2·V·(D-1)/(D·W), V / W with W the NIC's
 *    bytes/s x 370/450: ib-hdr's twice ib-ndr's, opa's four times;
 *  - the refusals: an unknown fabric, a file without a source, a kind that
 *    joins no nodes, a system without a scale-out level; hw is unchanged;
 *  - 128 v5p chips at --slice-chips 64 are 2 slices of 4x4x4 (every side
 *    wraps: multiples of 4) joined over DCN, where without it they are one
 *    4x4x8 slice; the data axis of 2 lies on DCN and its gradient
 *    all-reduce takes the book's DP-across-pods time (PLANNER.md 2.5:
 *    T = 8DF / (M·W_dcn), written with the ring's (k-1)/k, k = 2 slices, and
 *    DCN's 0.9), the fsdp axis of 64 all-gathers over the 3 wrapping axes of
 *    the slice at V / (W_ici·3) (PLANNER.md 2.3, W_ici = 2 x 9e10 x 0.95);
 *    slice sizes that form no box, exceed the pod or sit on a system
 *    without a torus are refused naming the value. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/cost.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static mt_hardware *shipped(const char *name) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find(name, &hw, NULL, 0));
    return hw;
}

/* Seconds of a collective over `axes` of mesh `spec` on hw (and the map). */
static double coll(const mt_hardware *hw, const char *spec, const char *axes, mt__plan_coll kind,
                   double bytes, mt__plan_map *map_out) {
    int n = 0;
    MT_CHECK_OK(mt_mesh_spec_devices(spec, &n));
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    mt__plan_map map;
    MT_CHECK_OK(mt__plan_map_make(hw, m, &map));
    mt_axes ax;
    MT_CHECK_OK(mt_mesh_axes(m, axes, &ax));
    double t = mt__plan_collective_seconds(&map, kind, ax, bytes);
    mt_mesh_free(m);
    if (map_out) *map_out = map;
    return t;
}

/* ---- the chips --------------------------------------------------------------- */

MT_TEST(new_chips_give_their_datasheet_peaks_back) {
    const struct {
        const char *name;
        double bf16, fp32, hbm_bw, hbm_bytes;
    } chips[] = {
        {"h100-pcie", 1513e12 / 2, 51e12, 2.0e12, 80e9},
        {"h100-96gb", 990e12, 67e12, 4.0e12, 96e9},
    };
    const double n = 8192, flops = 2 * n * n * n, small = 3 * n * n * 2;
    for (size_t i = 0; i < sizeof chips / sizeof chips[0]; i++) {
        mt_hardware *hw = shipped(chips[i].name);
        bool fb = false;
        double t = mt__plan_op_seconds(hw, MT__PN_MATMUL, MT_HW_BF16, flops, small, &fb);
        MT_CHECK(fb, "%s: an 8192^3 product is compute-bound", chips[i].name);
        MT_CHECK_CLOSE(t * 1e6, flops / (chips[i].bf16 * 0.8) * 1e6, 1e-9, "%s product us",
                       chips[i].name);
        t = mt__plan_op_seconds(hw, MT__PN_VECTOR, MT_HW_FP32, 1e9 / 4, 1e9, &fb);
        MT_CHECK_CLOSE(t * 1e6, 1e9 / (chips[i].hbm_bw * 0.9) * 1e6, 1e-9, "%s stream us",
                       chips[i].name);
        MT_CHECK_CLOSE(hw->peak_flops[MT_HW_FP32], chips[i].fp32, 1e-12, "%s fp32",
                       chips[i].name);
        MT_CHECK_CLOSE(hw->hbm_bytes, chips[i].hbm_bytes, 1e-12, "%s HBM", chips[i].name);
        MT_CHECK(!hw->products16_fp16, "%s has bf16", chips[i].name);
        mt_hardware_free(hw);
    }
}

MT_TEST(h100_pcie_levels_are_bridge_pcie_infiniband) {
    mt_hardware *hw = shipped("h100-pcie");
    MT_CHECK(hw->n_levels == 3, "%d levels", hw->n_levels);
    const mt_hw_level *nv = &hw->levels[0], *pcie = &hw->levels[1], *ib = &hw->levels[2];
    MT_CHECK(nv->kind == MT_LINK_NVLINK && nv->devices == 2, "bridge pair: %s of %d",
             mt_link_kind_name(nv->kind), nv->devices);
    /* the datasheet's NVLink 600 GB/s bidirectional: 300e9 each way */
    MT_CHECK_CLOSE(nv->link_bandwidth * nv->links, 300e9, 1e-12, "bridge egress");
    /* PCIe Gen5 x16: the datasheet's 128 GB/s bidirectional, 64e9 each way */
    MT_CHECK(pcie->kind == MT_LINK_PCIE && pcie->devices == 8 &&
             strcmp(mt_link_kind_name(pcie->kind), "pcie") == 0, "PCIe server of 8: %s %d",
             mt_link_kind_name(pcie->kind), pcie->devices);
    MT_CHECK_CLOSE(pcie->link_bandwidth * pcie->links, 64e9, 1e-12, "PCIe egress");
    MT_CHECK(ib->kind == MT_LINK_INFINIBAND && ib->devices == 0, "InfiniBand outermost");
    /* an all-gather of 1 GB over a data axis of 4 cards: on PCIe, one card
       of each bridge pair (stride 2), by the switch form V (D-1)/D / (g W),
       g = 1 member a pair below: 1e9 x 3/4 / (64e9 x 0.8), and NCCL's ring's 3
       steps over PCIe at its 1.0 us each (the ring stays in the server) */
    MT_CHECK_CLOSE(pcie->latency, 1e-6, 1e-12, "NCCL's PCI hop");
    MT_CHECK_CLOSE(coll(hw, "data=4,tensor=2", "data", MT__PC_ALL_GATHER, 1e9, NULL) * 1e6,
                   1e9 * 0.75 / (64e9 * 0.8) * 1e6 + 3 * 1.0, 1e-9, "all-gather over PCIe, us");
    mt_hardware_free(hw);
}

/* ---- fabrics ------------------------------------------------------------------ */

MT_TEST(fabrics_replace_the_scale_out_level) {
    const struct {
        const char *name, *kind;
        double nic;   /* bytes/s one way a NIC, from the Gb/s of its datasheet */
    } fab[] = {
        {"ib-hdr", "infiniband", 200e9 / 8},
        {"ib-ndr", "infiniband", 400e9 / 8},
        {"opa", "omnipath", 100e9 / 8},
        {"roce", "ethernet", 400e9 / 8},
    };
    const double V = 1e9, nccl = 370.0 / 450;
    double t[4];
    for (int i = 0; i < 4; i++) {
        mt_hardware *hw = shipped("h100-sxm");
        const mt_hw_level node = hw->levels[0];
        char found[4096];
        MT_CHECK_OK(mt_hardware_set_fabric(hw, fab[i].name, found, sizeof found));
        char want_path[64], want_name[64];
        snprintf(want_path, sizeof want_path, "fabrics/%s.json", fab[i].name);
        snprintf(want_name, sizeof want_name, "h100-sxm+%s", fab[i].name);
        MT_CHECK(strstr(found, want_path), "%s found at %s", fab[i].name, found);
        MT_CHECK(strcmp(hw->fabric, fab[i].name) == 0 && strcmp(hw->name, want_name) == 0,
                 "fabric '%s', name '%s'", hw->fabric, hw->name);
        const mt_hw_level *l = &hw->levels[1];
        MT_CHECK(hw->n_levels == 2 && strcmp(mt_link_kind_name(l->kind), fab[i].kind) == 0 &&
                 l->topology == MT_TOPO_SWITCH && l->devices == 0,
                 "%s: %s %s of %d", fab[i].name, mt_link_kind_name(l->kind),
                 mt_topology_name(l->topology), l->devices);
        MT_CHECK_CLOSE(l->link_bandwidth * l->links, fab[i].nic, 1e-12, "%s egress", fab[i].name);
        MT_CHECK(!memcmp(&node, &hw->levels[0], sizeof node), "%s: the node level changed",
                 fab[i].name);
        /* data=2 across two nodes of tensor=8: the ring all-reduce 2 V (D-1)/(D W) = V / W,
           and its 2 steps across the network at NCCL's 2.7 us each (set apart below) */
        MT_CHECK_CLOSE(l->latency, 2.7e-6, 1e-12, "%s: NCCL's network hop", fab[i].name);
        t[i] = coll(hw, "data=2,tensor=8", "data", MT__PC_ALL_REDUCE, V, NULL) - 2 * 2.7e-6;
        MT_CHECK_CLOSE(t[i] * 1e3, V / (fab[i].nic * nccl) * 1e3, 1e-6, "%s all-reduce ms",
                       fab[i].name);
        mt_hardware_free(hw);
    }
    MT_CHECK_CLOSE(t[0] / t[1], 2.0, 1e-9, "ib-hdr / ib-ndr");
    MT_CHECK_CLOSE(t[2] / t[1], 4.0, 1e-9, "opa / ib-ndr");
    MT_CHECK_CLOSE(t[3] / t[1], 1.0, 1e-9, "roce / ib-ndr");
    /* the TPU's DCN too: v5p's 6.25e9 a chip becomes ib-ndr's 50e9 */
    mt_hardware *tpu = shipped("tpu-v5p");
    MT_CHECK_OK(mt_hardware_set_fabric(tpu, "ib-ndr", NULL, 0));
    MT_CHECK(tpu->levels[1].kind == MT_LINK_INFINIBAND && tpu->levels[0].kind == MT_LINK_ICI,
             "v5p + ib-ndr levels");
    mt_hardware_free(tpu);
}

/* A fabric file in a scratch folder, `body` its text. */
static void write_file(const char *path, const char *body) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s: %s", path, strerror(errno));
    fputs(body, f);
    fclose(f);
}

MT_TEST(fabric_refusals_name_the_value) {
    char dir[64] = "/tmp/mt_test_fabric_XXXXXX", path[128];
    MT_CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/f.json", dir);
    mt_hardware *hw = shipped("h100-sxm");
    const mt_hardware before = *hw;
    MT_CHECK_FAILS(mt_hardware_set_fabric(hw, "ib-xdr", NULL, 0), MT_EINVAL, "'ib-xdr'",
                   "ib-hdr, ib-ndr, opa, roce");
    /* a number without its source */
    write_file(path, "{\"format\": \"meshtrain-fabric-1\", \"name\": \"f\", \"description\": "
                     "\"d\", \"level\": {\"kind\": \"infiniband\", \"link_bandwidth\": {\"value\": "
                     "5e10, \"source\": \"s\"}, \"links\": {\"value\": 1}, \"latency\": "
                     "{\"value\": 2e-5, \"source\": \"s\"}, \"collective_fraction\": {\"value\": "
                     "0.8, \"source\": \"s\"}}}");
    MT_CHECK_FAILS(mt_hardware_set_fabric(hw, path, NULL, 0), MT_EFORMAT, "fabric file",
                   path, "level.links", "\"source\"");
    /* a kind that joins no nodes */
    write_file(path, "{\"format\": \"meshtrain-fabric-1\", \"name\": \"f\", \"description\": "
                     "\"d\", \"level\": {\"kind\": \"nvlink\", \"link_bandwidth\": {\"value\": "
                     "5e10, \"source\": \"s\"}, \"links\": {\"value\": 1, \"source\": \"s\"}, "
                     "\"latency\": {\"value\": 2e-5, \"source\": \"s\"}, "
                     "\"collective_fraction\": {\"value\": 0.8, \"source\": \"s\"}}}");
    MT_CHECK_FAILS(mt_hardware_set_fabric(hw, path, NULL, 0), MT_EFORMAT, "level.kind",
                   "joins nodes");
    /* a hardware file is not a fabric file */
    char hwpath[4096];
    mt_hardware *tmp = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &tmp, hwpath, sizeof hwpath));
    mt_hardware_free(tmp);
    MT_CHECK_FAILS(mt_hardware_set_fabric(hw, hwpath, NULL, 0), MT_EFORMAT, "is not a known key");
    MT_CHECK(!memcmp(&before, hw, sizeof before), "hw changed by a refused fabric");
    unlink(path);
    rmdir(dir);
    /* a system of one level has none to replace */
    hw->n_levels = 1;
    MT_CHECK_FAILS(mt_hardware_set_fabric(hw, "ib-ndr", NULL, 0), MT_EINVAL, "'ib-ndr'",
                   "no scale-out level");
    mt_hardware_free(hw);
}

/* A bare name is looked for in $MESHTRAIN_HARDWARE_DIR/fabrics first (the
 * install folder's fabrics/ next, then the source tree's). */
MT_TEST(fabric_found_in_the_env_folder_first) {
    char dir[64] = "/tmp/mt_test_fabric_XXXXXX", sub[128], path[192];
    MT_CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(sub, sizeof sub, "%s/fabrics", dir);
    MT_CHECK(mkdir(sub, 0700) == 0, "mkdir %s: %s", sub, strerror(errno));
    snprintf(path, sizeof path, "%s/ib-ndr.json", sub);
    /* a slower ib-ndr than the shipped one, to tell them apart */
    write_file(path, "{\"format\": \"meshtrain-fabric-1\", \"name\": \"ib-ndr\", "
                     "\"description\": \"d\", \"level\": {\"kind\": \"infiniband\", "
                     "\"link_bandwidth\": {\"value\": 1e10, \"source\": \"s\"}, \"links\": "
                     "{\"value\": 1, \"source\": \"s\"}, \"latency\": {\"value\": 2e-5, "
                     "\"source\": \"s\"}, \"collective_fraction\": {\"value\": 0.8, "
                     "\"source\": \"s\"}}}");
    MT_CHECK(setenv("MESHTRAIN_HARDWARE_DIR", dir, 1) == 0, "setenv");
    mt_hardware *hw = shipped("h100-sxm");
    char found[4096];
    MT_CHECK_OK(mt_hardware_set_fabric(hw, "ib-ndr", found, sizeof found));
    MT_CHECK(strcmp(found, path) == 0, "found %s, want %s", found, path);
    MT_CHECK_CLOSE(hw->levels[1].link_bandwidth, 1e10, 1e-12, "the env folder's ib-ndr");
    mt_hardware_free(hw);
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}

/* ---- slices ------------------------------------------------------------------- */

MT_TEST(two_v5p_slices_of_64_over_dcn) {
    mt_hardware *hw = shipped("tpu-v5p");
    mt__plan_map map;
    /* the default: 128 chips are one 4x4x8 slice */
    coll(hw, "data=2,fsdp=64", "data", MT__PC_ALL_REDUCE, 1e6, &map);
    MT_CHECK(map.slices == 1 && map.slice_dims[0] == 4 && map.slice_dims[1] == 4 &&
             map.slice_dims[2] == 8, "default: %d slices of %dx%dx%d", map.slices,
             map.slice_dims[0], map.slice_dims[1], map.slice_dims[2]);
    MT_CHECK_OK(mt_hardware_set_slice_chips(hw, 64));
    /* LLaMA-3 70B's MLP (D = 8192, F = 28672): the bf16 gradients of W_in and
       W_out, 4DF bytes, over the M = 64 chips of a slice (FSDP within it) */
    const double D = 8192, F = 28672, M = 64, k = 2, V = 4 * D * F / M;
    const double w_dcn = 6.25e9 * 0.9;
    const double book = 8 * D * F / (M * w_dcn) * (k - 1) / k;
    double t = coll(hw, "data=2,fsdp=64", "data", MT__PC_ALL_REDUCE, V, &map);
    MT_CHECK(map.slices == 2 && map.slice_n_dims == 3 && map.instance[0] == 64 &&
             map.instance[1] == 128, "%d slices, instances %d, %d", map.slices,
             map.instance[0], map.instance[1]);
    for (int j = 0; j < 3; j++)
        MT_CHECK(map.slice_dims[j] == 4 && map.slice_wrap[j], "side %d: %d%s", j,
                 map.slice_dims[j], map.slice_wrap[j] ? " wraps" : "");
    MT_CHECK(map.axis[0].level == 1 && map.axis[1].level == 0, "data on level %d, fsdp on %d",
             map.axis[0].level, map.axis[1].level);
    MT_CHECK_CLOSE(t * 1e6, book * 1e6, 1e-9, "data all-reduce over DCN, us");
    MT_CHECK_CLOSE(t * 1e3, 2.609789, 1e-6, "the same in ms, worked out");
    /* fsdp=64 fills the slice: three wrapping axes, V / (W_ici x 3) */
    const double w_ici = 2 * 9e10 * 0.95, G = 1e9;
    t = coll(hw, "data=2,fsdp=64", "fsdp", MT__PC_ALL_GATHER, G, NULL);
    MT_CHECK_CLOSE(t * 1e6, G / (w_ici * 3) * 1e6, 1e-9, "fsdp all-gather on the slice, us");
    /* a run of one slice or less is laid as without the setting */
    coll(hw, "fsdp=32", "fsdp", MT__PC_ALL_GATHER, G, &map);
    MT_CHECK(map.slices == 1 && map.slice_dims[2] == 4 && map.slice_dims[0] == 2,
             "32 chips: %d slices of %dx%dx%d", map.slices, map.slice_dims[0],
             map.slice_dims[1], map.slice_dims[2]);
    /* more chips than a slice that are no multiple of it */
    int n = 0;
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_spec_devices("data=96", &n));
    MT_CHECK_OK(mt_mesh_create("data=96", n, &m));
    MT_CHECK_FAILS(mt__plan_map_make(hw, m, &map), MT_EINVAL, "96 devices",
                   "slices of 64 chips");
    mt_mesh_free(m);
    mt_hardware_free(hw);
}

MT_TEST(slice_sizes_refused_name_the_value) {
    mt_hardware *hw = shipped("tpu-v5p");
    /* 97 is prime, past every side: no box */
    MT_CHECK_FAILS(mt_hardware_set_slice_chips(hw, 97), MT_EINVAL, "--slice-chips 97",
                   "16x20x28", "96, 4x4x6");
    MT_CHECK_FAILS(mt_hardware_set_slice_chips(hw, 8961), MT_EINVAL, "8961", "1 to 8960");
    MT_CHECK_FAILS(mt_hardware_set_slice_chips(hw, -1), MT_EINVAL, "-1");
    MT_CHECK(hw->slice_chips == 0, "refused, yet set to %d", hw->slice_chips);
    hw->n_levels = 1;   /* a torus with nothing above it */
    MT_CHECK_FAILS(mt_hardware_set_slice_chips(hw, 64), MT_EINVAL, "64", "no level above");
    mt_hardware_free(hw);
    hw = shipped("h100-sxm");
    MT_CHECK_FAILS(mt_hardware_set_slice_chips(hw, 8), MT_EINVAL, "--slice-chips 8",
                   "h100-sxm", "no torus");
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
