/* test_hardware.c — the hardware descriptions (include/meshtrain/plan.h):
 * every shipped file loads; the figures the planner's tests will lean on
 * equal a table copied by hand from the scaling book's numbers
 * (../shared/PLANNER.md 2.1) and the vendors' datasheets; each validation
 * error of a hand-made bad file is refused naming the file and the field,
 * and so is the file cut short at every byte;
 * a machine file written by mt_machine_write loads as a one-level host;
 * the search path finds a name in MESHTRAIN_HARDWARE_DIR first. */
#include "meshtrain.h"
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

static const char *SHIPPED[] = {"v100-32gb", "a100-80gb", "a100-40gb", "h100-sxm", "h100-pcie",
                                "h100-96gb", "h200", "b200", "tpu-v4p", "tpu-v5e", "tpu-v5p",
                                "tpu-v6e"};
#define N_SHIPPED ((int)(sizeof SHIPPED / sizeof SHIPPED[0]))

/* The source tree's hardware/: the last folder mt_hardware_find searches. */
static const char *source_dir(void) {
    const char *dirs[4];
    int n = mt_hardware_dirs(dirs, 4);
    MT_CHECK(n >= 1, "no hardware folder compiled in");
    return dirs[n - 1];
}

static mt_hardware *load_shipped(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json", source_dir(), name);
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_load(path, &hw));
    return hw;
}

MT_TEST(every_shipped_file_loads) {
    for (int i = 0; i < N_SHIPPED; i++) {
        mt_hardware *hw = load_shipped(SHIPPED[i]);
        MT_CHECK(strcmp(hw->name, SHIPPED[i]) == 0, "%s: name '%s'", SHIPPED[i], hw->name);
        MT_CHECK(hw->n_levels >= 2, "%s: %d levels", SHIPPED[i], hw->n_levels);
        MT_CHECK(hw->levels[hw->n_levels - 1].devices == 0, "%s: outermost level bounded",
                 SHIPPED[i]);
        mt_hardware_free(hw);
    }
    /* and whatever else the folder holds (a machine file added later) */
    DIR *d = opendir(source_dir());
    MT_CHECK(d, "cannot list %s", source_dir());
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", source_dir(), e->d_name);
        mt_hardware *hw = NULL;
        MT_CHECK_OK(mt_hardware_load(path, &hw));
        mt_hardware_free(hw);
        n++;
    }
    closedir(d);
    MT_CHECK(n >= N_SHIPPED, "%d files in %s", n, source_dir());
}

/* Hand-copied from ../shared/PLANNER.md 2.1 (the scaling book's tables) and
 * the datasheets, independent of the files. */
typedef struct {
    const char *name;
    double      bf16, hbm_bytes, hbm_bw, link_one_way, links, egress;
    const char *inner_kind;
} expect;

static const expect TABLE[] = {
    /* v5p: 96 GB, 2.8e12 B/s, 4.59e14 bf16, ICI 9e10 one-way per link, 3-D torus */
    {"tpu-v5p", 4.59e14, 96e9, 2.8e12, 9e10, 6, 6 * 9e10, "ici"},
    {"tpu-v4p", 2.75e14, 32e9, 1.2e12, 4.5e10, 6, 6 * 4.5e10, "ici"},
    {"tpu-v5e", 1.97e14, 16e9, 8.1e11, 4.5e10, 4, 4 * 4.5e10, "ici"},
    {"tpu-v6e", 9.20e14, 32e9, 1.6e12, 9e10, 4, 4 * 9e10, "ici"},
    /* H100: 9.9e14 (the book), 3.35e12 (datasheet and the roofline chapter), 80 GB;
       NVLink egress 450e9 B/s */
    {"h100-sxm", 9.9e14, 80e9, 3.35e12, 25e9, 18, 450e9, "nvlink"},
    {"h200", 9.9e14, 141e9, 4.8e12, 25e9, 18, 450e9, "nvlink"},
    {"b200", 2.3e15, 192e9, 8.0e12, 50e9, 18, 900e9, "nvlink"},
    /* A100 SXM4 80GB datasheet: 312 TFLOPS bf16, 2,039 GB/s, NVLink 600 GB/s bidirectional */
    {"a100-80gb", 312e12, 80e9, 2.039e12, 25e9, 12, 300e9, "nvlink"},
    /* A100 SXM4 40GB datasheet: the same chip and links, 40 GB of HBM2 at 1,555 GB/s */
    {"a100-40gb", 312e12, 40e9, 1.555e12, 25e9, 12, 300e9, "nvlink"},
    /* V100 SXM2 32GB datasheet: 125 TFLOPS fp16 tensor (no bf16: its 16-bit products),
       900 GB/s, NVLink 300 GB/s bidirectional over 6 links */
    {"v100-32gb", 125e12, 32e9, 9e11, 25e9, 6, 150e9, "nvlink"},
    /* H100 PCIe datasheet: 1,513 TFLOPS bf16 with sparsity (756.5 dense), 80 GB HBM2e at
       2 TB/s, NVLink bridges 600 GB/s bidirectional (12 links of 25 GB/s each way) */
    {"h100-pcie", 756.5e12, 80e9, 2e12, 25e9, 12, 300e9, "nvlink"},
    /* GH200 datasheet, the 96 GB HBM3 part: 990 TFLOPS bf16 dense, 4 TB/s, NVLink 900 GB/s
       bidirectional */
    {"h100-96gb", 990e12, 96e9, 4e12, 25e9, 18, 450e9, "nvlink"},
};

/* A chip without bf16 (V100) gives fp16, and its 16-bit products run at it;
 * the others have bf16 and say so. */
MT_TEST(fp16_stands_for_bf16_where_the_chip_has_none) {
    mt_hardware *v = load_shipped("v100-32gb"), *a = load_shipped("a100-80gb");
    MT_CHECK(v->products16_fp16 && v->peak_flops[MT_HW_FP16] == 125e12 &&
             v->peak_flops[MT_HW_BF16] == 125e12, "v100: fp16 %g, bf16 %g, flag %d",
             v->peak_flops[MT_HW_FP16], v->peak_flops[MT_HW_BF16], v->products16_fp16);
    MT_CHECK(!a->products16_fp16 && a->peak_flops[MT_HW_FP16] == 0, "a100: bf16 products");
    MT_CHECK(strcmp(mt_hw_dtype_name(MT_HW_FP16), "fp16") == 0, "fp16's name");
    mt_hardware_free(v);
    mt_hardware_free(a);
}

MT_TEST(figures_match_the_book) {
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++) {
        const expect *e = &TABLE[i];
        mt_hardware *hw = load_shipped(e->name);
        const mt_hw_level *l = &hw->levels[0];
        MT_CHECK_CLOSE(hw->peak_flops[MT_HW_BF16], e->bf16, 1e-12, "%s bf16", e->name);
        MT_CHECK_CLOSE(hw->hbm_bytes, e->hbm_bytes, 1e-12, "%s HBM bytes", e->name);
        MT_CHECK_CLOSE(hw->hbm_bandwidth, e->hbm_bw, 1e-12, "%s HBM bandwidth", e->name);
        MT_CHECK_CLOSE(l->link_bandwidth, e->link_one_way, 1e-12, "%s link", e->name);
        MT_CHECK_CLOSE(l->links, e->links, 1e-12, "%s links", e->name);
        MT_CHECK_CLOSE(l->link_bandwidth * l->links, e->egress, 1e-12, "%s egress", e->name);
        MT_CHECK(strcmp(mt_link_kind_name(l->kind), e->inner_kind) == 0, "%s: inner kind %s",
                 e->name, mt_link_kind_name(l->kind));
        mt_hardware_free(hw);
    }
    /* the v5p pod: 16x20x28 = 8960 chips, every axis wraps; DCN 6.25e9 per chip */
    mt_hardware *hw = load_shipped("tpu-v5p");
    const mt_hw_level *ici = &hw->levels[0], *dcn = &hw->levels[1];
    MT_CHECK(ici->topology == MT_TOPO_TORUS && ici->n_dims == 3 && ici->dims[0] == 16 &&
             ici->dims[1] == 20 && ici->dims[2] == 28 && ici->devices == 8960,
             "v5p torus %dx%dx%d = %d", ici->dims[0], ici->dims[1], ici->dims[2], ici->devices);
    MT_CHECK(ici->wrap[0] && ici->wrap[1] && ici->wrap[2], "v5p wraparound");
    /* the book: wraparound "only on axes of size 16 (v5e/v6e) or multiples of 4 (v*p)" */
    MT_CHECK(ici->slice_wrap == 4, "v5p slice_wrap %d", ici->slice_wrap);
    {
        mt_hardware *e = load_shipped("tpu-v5e");
        MT_CHECK(e->levels[0].slice_wrap == 16, "v5e slice_wrap %d", e->levels[0].slice_wrap);
        mt_hardware_free(e);
    }
    MT_CHECK_CLOSE(ici->latency, 1e-6, 1e-12, "v5p ICI hop latency");
    MT_CHECK(dcn->kind == MT_LINK_DCN, "v5p outer level %s", mt_link_kind_name(dcn->kind));
    MT_CHECK_CLOSE(dcn->link_bandwidth * dcn->links, 6.25e9, 1e-12, "v5p DCN egress");
    /* the book's alpha = C / W_bidi = 4.59e14 / 1.8e11 = 2550 */
    MT_CHECK_CLOSE(hw->peak_flops[MT_HW_BF16] / (2 * ici->link_bandwidth), 2550, 1e-12, "alpha");
    mt_hardware_free(hw);
    /* H100: the book's DP bound within a node, 990e12 / 450e9 = 2200 tokens per GPU */
    hw = load_shipped("h100-sxm");
    MT_CHECK_CLOSE(hw->peak_flops[MT_HW_BF16] / (hw->levels[0].link_bandwidth * hw->levels[0].links),
                   2200, 1e-12, "H100 critical batch in a node");
    MT_CHECK_CLOSE(hw->levels[1].link_bandwidth * 8, 400e9, 1e-12, "H100 node egress over IB");
    MT_CHECK(hw->peak_flops[MT_HW_TF32] > 0 && hw->peak_flops[MT_HW_FP8] > 0, "H100 tf32, fp8");
    mt_hardware_free(hw);
}

/* ---- bad files ------------------------------------------------------------- */

static const char *GOOD =
    "{\"format\": \"meshtrain-hardware-1\", \"name\": \"toy\", \"description\": \"a toy\",\n"
    " \"chip\": {\"flops\": {\"bf16\": {\"value\": 1e14, \"source\": \"s1\"}},\n"
    "          \"hbm_bytes\": {\"value\": 1e10, \"source\": \"s2\"},\n"
    "          \"hbm_bandwidth\": {\"value\": 1e12, \"source\": \"s3\"}},\n"
    " \"achievable\": {\"gemm\": {\"value\": 0.9, \"source\": \"s4\"},\n"
    "                \"hbm\": {\"value\": 0.8, \"source\": \"s5\"}},\n"
    " \"levels\": [{\"kind\": \"ici\", \"topology\": \"torus\", \"devices\": 8,\n"
    "              \"dims\": [2, 4], \"wrap\": [false, true],\n"
    "              \"link_bandwidth\": {\"value\": 4.5e10, \"source\": \"s6\"},\n"
    "              \"links\": {\"value\": 4, \"source\": \"s7\"},\n"
    "              \"latency\": {\"value\": 1e-6, \"source\": \"s8\"},\n"
    "              \"collective_fraction\": {\"value\": 0.95, \"source\": \"s9\"}},\n"
    "             {\"kind\": \"dcn\", \"topology\": \"switch\", \"devices\": 0,\n"
    "              \"link_bandwidth\": {\"value\": 6e9, \"source\": \"s10\"},\n"
    "              \"links\": {\"value\": 1, \"source\": \"s11\"},\n"
    "              \"latency\": {\"value\": 2e-5, \"source\": \"s12\"},\n"
    "              \"collective_fraction\": {\"value\": 0.9, \"source\": \"s13\"}}]}\n";

typedef struct {
    char dir[64], path[128];
} scratch;

static void scratch_open(scratch *sc) {
    snprintf(sc->dir, sizeof sc->dir, "/tmp/mt_test_hardware_XXXXXX");
    MT_CHECK(mkdtemp(sc->dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(sc->path, sizeof sc->path, "%s/toy.json", sc->dir);
}

static void scratch_close(scratch *sc) {
    unlink(sc->path);
    rmdir(sc->dir);
}

/* Writes GOOD with its first `from` replaced by `to` to sc->path. */
static void write_variant(scratch *sc, const char *from, const char *to) {
    const char *at = from ? strstr(GOOD, from) : NULL;
    MT_CHECK(!from || at, "the template lacks '%s'", from);
    FILE *f = fopen(sc->path, "w");
    MT_CHECK(f, "cannot write %s", sc->path);
    if (at) {
        fwrite(GOOD, 1, (size_t)(at - GOOD), f);
        fputs(to, f);
        fputs(at + strlen(from), f);
    } else fputs(GOOD, f);
    fclose(f);
}

MT_TEST(good_template_loads) {
    scratch sc;
    scratch_open(&sc);
    write_variant(&sc, NULL, NULL);
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_load(sc.path, &hw));
    MT_CHECK(hw->n_levels == 2 && hw->levels[0].n_dims == 2 && !hw->levels[0].wrap[0] &&
             hw->levels[0].wrap[1], "toy torus");
    MT_CHECK(hw->peak_flops[MT_HW_FP32] == 0 && hw->peak_flops[MT_HW_BF16] == 1e14, "toy flops");
    MT_CHECK(hw->levels[0].slice_wrap == 0, "toy: no slice_wrap, 0");
    mt_hardware_free(hw);
    scratch_close(&sc);
}

typedef struct {
    const char *from, *to, *field, *what;
} bad_case;

static const bad_case BAD[] = {
    {"\"hbm_bytes\": {\"value\": 1e10, \"source\": \"s2\"},", "", "chip.hbm_bytes", "missing"},
    {"\"value\": 1e12", "\"value\": 1e999", "byte", "finite"},
    {"\"value\": 1e12", "\"value\": -1e12", "chip.hbm_bandwidth", "positive"},
    {"\"value\": 1e12", "\"value\": 0", "chip.hbm_bandwidth", "positive"},
    {"\"value\": 0.9, \"source\": \"s4\"", "\"value\": 1.5, \"source\": \"s4\"", "achievable.gemm",
     "(0, 1]"},
    {"\"value\": 0.95", "\"value\": 1.01", "levels[0].collective_fraction", "(0, 1]"},
    {"\"kind\": \"dcn\"", "\"kind\": \"nvswitch\"", "levels[1].kind", "not one of"},
    {"\"topology\": \"switch\"", "\"topology\": \"mesh\"", "levels[1].topology", "not one of"},
    {", \"source\": \"s8\"", "", "levels[0].latency", "no \"source\""},
    {"\"source\": \"s3\"", "\"source\": \"\"", "chip.hbm_bandwidth", "empty \"source\""},
    {"\"source\": \"s1\"", "\"source\": 7", "chip.flops.bf16.source", "want a string"},
    {"\"bf16\"", "\"bf17\"", "chip.flops.bf17", "not a known key"},
    {"\"dims\": [2, 4]", "\"dims\": [2, 3]", "levels[0].dims", "multiply to 6"},
    {"\"wrap\": [false, true]", "\"wrap\": [false]", "levels[0].wrap", "one true/false per axis"},
    {"\"devices\": 8", "\"devices\": 0", "levels[0].devices", "only the outermost"},
    {"\"wrap\": [false, true],", "\"wrap\": [false, true], \"slice_wrap\": {\"value\": 2.5, "
     "\"source\": \"s\"},", "levels[0].slice_wrap", "whole number"},
    {"\"wrap\": [false, true],", "\"wrap\": [false, true], \"slice_wrap\": {\"value\": 4},",
     "levels[0].slice_wrap", "no \"source\""},
    {"\"devices\": 0,", "\"devices\": 0, \"slice_wrap\": {\"value\": 4, \"source\": \"s\"},",
     "levels[1].slice_wrap", "torus only"},
    {"\"devices\": 0", "\"devices\": 12", "levels[1].devices", "a multiple of levels[0].devices, 8"},
    {"\"devices\": 0", "\"devices\": 8", "levels[1].devices", "and larger"},
    {"\"devices\": 0", "\"devices\": -8", "levels[1].devices", "whole number >= 0"},
    {"meshtrain-hardware-1", "meshtrain-hardware-9", "format", "only that version"},
    {"\"name\": \"toy\",", "", "name", "missing"},
    {"\"levels\": [", "\"levels\": [3, ", "levels[0]", "must be an object"},
    {"{\"format\"", "{\"format\" \"x\",", "byte 10", "':'"},
};

MT_TEST(bad_files_refused) {
    scratch sc;
    scratch_open(&sc);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case *b = &BAD[i];
        write_variant(&sc, b->from, b->to);
        mt_hardware *hw = (mt_hardware *)1;
        MT_CHECK_FAILS(mt_hardware_load(sc.path, &hw), MT_EFORMAT, sc.path, b->field, b->what);
        MT_CHECK(hw == NULL, "case %zu: *out not NULL after a failure", i);
    }
    MT_CHECK_FAILS(mt_hardware_load(sc.dir, &(mt_hardware *){0}), MT_EIO, "hardware file",
                   "directory");
    scratch_close(&sc);
}

MT_TEST(every_truncation_refused) {
    scratch sc;
    scratch_open(&sc);
    size_t n = strlen(GOOD) - 2;   /* "}\n" ends it: every shorter prefix is unfinished */
    for (size_t len = 0; len <= n; len++) {
        FILE *f = fopen(sc.path, "w");
        MT_CHECK(f, "cannot write %s", sc.path);
        fwrite(GOOD, 1, len, f);
        fclose(f);
        mt_hardware *hw = NULL;
        mt_status s = mt_hardware_load(sc.path, &hw);
        MT_CHECK(s == MT_EFORMAT && hw == NULL, "a file cut at byte %zu -> %s (%s)", len,
                 mt_status_name(s), mt_errmsg());
        MT_CHECK(strstr(mt_errmsg(), sc.path), "message '%s' does not name the file", mt_errmsg());
    }
    scratch_close(&sc);
}

/* ---- this machine ------------------------------------------------------------ */

MT_TEST(machine_file_loads) {
    scratch sc;
    scratch_open(&sc);
    mt_machine m = {
        .cpu = "test CPU", .cores = 4, .blas_core = "Haswell",
        .sgemm_gflops_1 = 100, .sgemm_gflops_all = 360, .sgemm_size = 2048,
        .fma_gflops_1 = 120, .fma_gflops_all = 480, .bf16_gflops_1 = NAN, .bf16_gflops_all = NAN,
        .triad_gbs_1 = 20, .triad_gbs_all = 40, .triad_bytes_per_element = 12,
        .threads = {.latency_us = 2.5, .busbw_gbs = 8}, .has_mpi = false,
        .mpi = {NAN, NAN}, .nominal_gflops = 500, .nominal_ghz = 3.9,
        .measured_at = "2026-12-02T08:00:00Z"};
    for (int i = 0; i < 4; i++) m.fma_isa_gflops_1[i] = m.fma_isa_gflops_all[i] = NAN;
    MT_CHECK_OK(mt_machine_write(&m, sc.path));
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_load(sc.path, &hw));
    MT_CHECK(strcmp(hw->name, "this-machine") == 0, "name %s", hw->name);
    MT_CHECK_CLOSE(hw->peak_flops[MT_HW_FP32], 480e9, 1e-12, "fp32 peak = FMA on all cores");
    MT_CHECK(hw->peak_flops[MT_HW_BF16] == 0, "no bf16 measured");
    MT_CHECK_CLOSE(hw->gemm_fraction, 360.0 / 480.0, 1e-12, "sgemm / FMA peak");
    MT_CHECK_CLOSE(hw->thread_gemm_fraction, 100.0 / (480.0 / 4), 1e-12,
                   "one thread's sgemm / a core's share of the peak");
    MT_CHECK_CLOSE(hw->hbm_bandwidth, 40e9, 1e-12, "triad");
    MT_CHECK(hw->hbm_bytes > 0 && hw->hbm_fraction == 1, "memory");
    const mt_hw_level *l = &hw->levels[0];
    MT_CHECK(hw->n_levels == 1 && l->kind == MT_LINK_THREADS && l->devices == 4, "one level");
    MT_CHECK_CLOSE(l->link_bandwidth, 8e9, 1e-12, "busbw");
    MT_CHECK_CLOSE(l->latency, 2.5e-6, 1e-12, "latency");
    mt_hardware_free(hw);
    /* with the engine's own products measured (one-thread sgemms on operands
       from memory), the products go by those */
    m.sgemm_cold_gflops_1 = 90, m.sgemm_cold_gflops_all = 330, m.sgemm_cold_size = 1024;
    MT_CHECK_OK(mt_machine_write(&m, sc.path));
    MT_CHECK_OK(mt_hardware_load(sc.path, &hw));
    MT_CHECK_CLOSE(hw->gemm_fraction, 330.0 / 480.0, 1e-12, "cold sgemm, a core each / peak");
    MT_CHECK_CLOSE(hw->thread_gemm_fraction, 90.0 / (480.0 / 4), 1e-12,
                   "one thread's cold sgemm / a core's share of the peak");
    MT_CHECK_CLOSE(hw->peak_flops[MT_HW_FP32], 480e9, 1e-12, "the peak unchanged");
    MT_CHECK(hw->vector_flops == 0, "kernels at the best level: the fp32 peak (%g)",
             hw->vector_flops);
    MT_CHECK(hw->n_attention == 0, "no attention measured: no curve");
    mt_hardware_free(hw);
    /* probed with the kernels capped at avx2 (MT_CPU_ISA): the ops other than
       products at avx2's peak, the products and the peak as measured */
    m.fma_isa_gflops_all[MT_ISA_AVX2] = 240, m.fma_isa_gflops_all[MT_ISA_AVX512] = 480;
    snprintf(m.isa_best, sizeof m.isa_best, "avx512");
    snprintf(m.isa_in_use, sizeof m.isa_in_use, "avx2");
    MT_CHECK_OK(mt_machine_write(&m, sc.path));
    MT_CHECK_OK(mt_hardware_load(sc.path, &hw));
    MT_CHECK_CLOSE(hw->vector_flops, 240e9, 1e-12, "capped: avx2's FMA peak");
    MT_CHECK_CLOSE(hw->peak_flops[MT_HW_FP32], 480e9, 1e-12, "capped: the peak the best level's");
    MT_CHECK_CLOSE(hw->gemm_fraction, 330.0 / 480.0, 1e-12, "capped: Open BLAS as measured");
    mt_hardware_free(hw);
    /* attention measured at T = 64 .. 1024 but 256: the curve over one thread's
       cold sgemm, the missing point left out */
    const double att[MT_MACHINE_N_ATTENTION] = {27, 45, NAN, 63, 72};
    memcpy(m.attention_gflops_1, att, sizeof att);
    m.attention_head_size = 64;
    MT_CHECK_OK(mt_machine_write(&m, sc.path));
    MT_CHECK_OK(mt_hardware_load(sc.path, &hw));
    MT_CHECK(hw->n_attention == 4 && hw->attention_seq[0] == 64 && hw->attention_seq[1] == 128 &&
             hw->attention_seq[2] == 512 && hw->attention_seq[3] == 1024, "the curve's T: %d points",
             hw->n_attention);
    MT_CHECK_CLOSE(hw->attention_fraction[0], 27.0 / 90, 1e-12, "T=64: 27 / 90 GFLOP/s");
    MT_CHECK_CLOSE(hw->attention_fraction[3], 72.0 / 90, 1e-12, "T=1024: 72 / 90 GFLOP/s");
    mt_hardware_free(hw);
    scratch_close(&sc);
}

/* ---- the search path ------------------------------------------------------------ */

MT_TEST(find_searches_env_then_shipped) {
    scratch sc;
    scratch_open(&sc);
    write_variant(&sc, NULL, NULL);
    mt_hardware *hw = NULL;
    char found[4096];
    unsetenv("MESHTRAIN_HARDWARE_DIR");
    MT_CHECK_OK(mt_hardware_find("tpu-v5p", &hw, found, sizeof found));
    MT_CHECK(strcmp(hw->name, "tpu-v5p") == 0 && strstr(found, "tpu-v5p.json"), "found %s", found);
    mt_hardware_free(hw);
    setenv("MESHTRAIN_HARDWARE_DIR", sc.dir, 1);
    MT_CHECK_OK(mt_hardware_find("toy", &hw, found, sizeof found));
    MT_CHECK(strcmp(found, sc.path) == 0, "found %s, want %s", found, sc.path);
    mt_hardware_free(hw);
    MT_CHECK_OK(mt_hardware_find(sc.path, &hw, NULL, 0));   /* a path as it is */
    mt_hardware_free(hw);
    MT_CHECK_FAILS(mt_hardware_find("no-such-chip", &hw, NULL, 0), MT_EIO, "'no-such-chip'",
                   sc.dir, "MESHTRAIN_HARDWARE_DIR");
    unsetenv("MESHTRAIN_HARDWARE_DIR");
    scratch_close(&sc);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
