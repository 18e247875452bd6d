/* test_profile.c — the machine file: a known record written and read back
 * equal, null figures, and malformed files (truncated, a value of the wrong
 * type, an unknown, missing or repeated key, trailing bytes) refused with
 * messages naming the file and the byte offset. */
#include "meshtrain.h"
#include "harness.h"

#include <math.h>

static mt_machine known(void) {
    mt_machine m = {
        .cpu = "AMD EPYC \"test\" \\ CPU", .cores = 2, .blas_core = "Cooperlake",
        .sgemm_gflops_1 = 231.5, .sgemm_gflops_all = 440.25, .sgemm_size = 4096,
        .fma_gflops_1 = 262.125, .fma_gflops_all = 519.75,
        .bf16_gflops_1 = 524.25, .bf16_gflops_all = 1039.5,
        .triad_gbs_1 = 39.5, .triad_gbs_all = 57.25, .triad_bytes_per_element = 12,
        .threads = {.latency_us = 0.5, .busbw_gbs = 11.25},
        .has_mpi = true, .mpi = {.latency_us = 0.15, .busbw_gbs = 2.0},
        .nominal_gflops = 524.8, .nominal_ghz = 4.1,
        .measured_at = "2026-11-30T23:40:00Z"};
    return m;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    MT_CHECK(f, "cannot read %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

MT_TEST(machine_round_trip) {
    const char *path = "/tmp/mt_test_profile_rt.json";
    mt_machine m = known(), back;
    MT_CHECK_OK(mt_machine_write(&m, path));
    MT_CHECK_OK(mt_machine_read(path, &back));
    MT_CHECK(strcmp(back.cpu, m.cpu) == 0, "cpu '%s'", back.cpu);
    MT_CHECK(strcmp(back.blas_core, m.blas_core) == 0 && strcmp(back.measured_at, m.measured_at) == 0,
             "strings");
    MT_CHECK(back.cores == 2 && back.sgemm_size == 4096 && back.triad_bytes_per_element == 12, "ints");
    const double got[] = {back.sgemm_gflops_1, back.sgemm_gflops_all, back.fma_gflops_1,
                          back.fma_gflops_all, back.triad_gbs_1, back.triad_gbs_all,
                          back.threads.latency_us, back.threads.busbw_gbs, back.mpi.latency_us,
                          back.mpi.busbw_gbs, back.nominal_gflops, back.nominal_ghz,
                          back.bf16_gflops_1, back.bf16_gflops_all};
    const double want[] = {m.sgemm_gflops_1, m.sgemm_gflops_all, m.fma_gflops_1,
                           m.fma_gflops_all, m.triad_gbs_1, m.triad_gbs_all,
                           m.threads.latency_us, m.threads.busbw_gbs, m.mpi.latency_us,
                           m.mpi.busbw_gbs, m.nominal_gflops, m.nominal_ghz,
                           m.bf16_gflops_1, m.bf16_gflops_all};
    for (int i = 0; i < (int)(sizeof got / sizeof got[0]); i++)
        MT_CHECK_CLOSE(got[i], want[i], 1e-6, "figure %d", i);
    MT_CHECK(back.has_mpi, "mpi present");
    remove(path);
}

/* The FMA peak of each kernel level and what the probe saw: read back as
 * written, a level the CPU lacks null in the file and NAN back, and the cold
 * sgemm; a file from before them (no "fma_gflops_by_isa", no "cpu_isa", no
 * "sgemm_cold_gflops") still reads, its levels NAN and its strings "". */
MT_TEST(machine_levels) {
    const char *path = "/tmp/mt_test_profile_levels.json";
    mt_machine m = known(), back;
    const double one[4] = {8.5, NAN, 131.25, 262.125}, all[4] = {16.75, NAN, 260.5, 519.75};
    for (int i = 0; i < 4; i++) m.fma_isa_gflops_1[i] = one[i], m.fma_isa_gflops_all[i] = all[i];
    snprintf(m.isa_best, sizeof m.isa_best, "avx512");
    snprintf(m.isa_in_use, sizeof m.isa_in_use, "avx2");
    snprintf(m.onednn_isa, sizeof m.onednn_isa, "avx512_core_amx");
    m.sgemm_cold_gflops_1 = 90.5, m.sgemm_cold_gflops_all = 178.25, m.sgemm_cold_size = 256;
    const double att[MT_MACHINE_N_ATTENTION] = {28.5, 41.25, NAN, 64.5, 66.75};
    memcpy(m.attention_gflops_1, att, sizeof att);
    m.attention_head_size = 64;
    MT_CHECK_OK(mt_machine_write(&m, path));
    char text[4096];
    snprintf(text, sizeof text, "%s", slurp(path));
    MT_CHECK(strstr(text, "\"neon\": null") && strstr(text, "\"avx2\": {\"1\": 131.25, \"all\": 260.5}") &&
             strstr(text, "\"cpu_isa\": {\"best\": \"avx512\", \"in_use\": \"avx2\""), "%s", text);
    MT_CHECK_OK(mt_machine_read(path, &back));
    for (int i = 0; i < 4; i++) {
        const mt_cpu_isa isa = (mt_cpu_isa)i;
        if (isnan(one[i]))
            MT_CHECK(isnan(mt_machine_isa_gflops(&back, isa, false)) &&
                     isnan(mt_machine_isa_gflops(&back, isa, true)), "%s null", mt_cpu_isa_name(isa));
        else {
            MT_CHECK_CLOSE(mt_machine_isa_gflops(&back, isa, false), one[i], 1e-9, "%s 1",
                           mt_cpu_isa_name(isa));
            MT_CHECK_CLOSE(mt_machine_isa_gflops(&back, isa, true), all[i], 1e-9, "%s all",
                           mt_cpu_isa_name(isa));
        }
    }
    MT_CHECK(strcmp(back.isa_best, "avx512") == 0 && strcmp(back.isa_in_use, "avx2") == 0 &&
             strcmp(back.onednn_isa, "avx512_core_amx") == 0, "cpu_isa strings");
    MT_CHECK(strstr(text, "\"sgemm_cold_gflops\": {\"1\": 90.5, \"all\": 178.25, \"size\": 256}"),
             "%s", text);
    MT_CHECK(back.sgemm_cold_gflops_1 == 90.5 && back.sgemm_cold_gflops_all == 178.25 &&
             back.sgemm_cold_size == 256, "cold sgemm back: %g %g %d", back.sgemm_cold_gflops_1,
             back.sgemm_cold_gflops_all, back.sgemm_cold_size);
    MT_CHECK(strstr(text, "\"attention_gflops\": {\"head_size\": 64, \"64\": 28.5, \"128\": 41.25, "
                          "\"256\": null, \"512\": 64.5, \"1024\": 66.75}"), "%s", text);
    for (int i = 0; i < MT_MACHINE_N_ATTENTION; i++)
        MT_CHECK(isnan(att[i]) ? isnan(back.attention_gflops_1[i])
                               : back.attention_gflops_1[i] == att[i], "attention at T=%d", 64 << i);
    MT_CHECK(back.attention_head_size == 64, "head size %d", back.attention_head_size);
    MT_CHECK(isnan(mt_machine_isa_gflops(&back, (mt_cpu_isa)7, true)), "no level 7");

    /* the same file as written before kernel levels: cut at the new keys */
    char *cut = strstr(text, ",\n \"fma_gflops_by_isa\"");
    MT_CHECK(cut, "the levels' key in %s", text);
    snprintf(cut, sizeof text - (size_t)(cut - text), "}\n");
    write_text(path, text);
    MT_CHECK_OK(mt_machine_read(path, &back));
    for (int i = 0; i < 4; i++)
        MT_CHECK(isnan(back.fma_isa_gflops_1[i]) && isnan(back.fma_isa_gflops_all[i]),
                 "an old file: level %d unknown", i);
    MT_CHECK(!back.isa_best[0] && !back.onednn_isa[0], "an old file: no cpu_isa");
    MT_CHECK(isnan(back.sgemm_cold_gflops_1) && isnan(back.sgemm_cold_gflops_all) &&
             back.sgemm_cold_size == 0, "an old file: no cold sgemm");
    for (int i = 0; i < MT_MACHINE_N_ATTENTION; i++)
        MT_CHECK(isnan(back.attention_gflops_1[i]), "an old file: no attention at T=%d", 64 << i);
    MT_CHECK(back.attention_head_size == 0, "an old file: no attention head size");
    MT_CHECK_CLOSE(back.fma_gflops_all, 519.75, 1e-9, "an old file: fma_gflops");
    remove(path);
}

/* Unknown figures are null in the file and NAN when read; no MPI is null. */
MT_TEST(machine_nulls) {
    const char *path = "/tmp/mt_test_profile_null.json";
    mt_machine m = known(), back;
    m.has_mpi = false;
    m.nominal_gflops = m.nominal_ghz = NAN;
    MT_CHECK_OK(mt_machine_write(&m, path));
    const char *text = slurp(path);
    MT_CHECK(strstr(text, "\"mpi\": null") && strstr(text, "\"nominal_gflops\": null"), "%s", text);
    MT_CHECK_OK(mt_machine_read(path, &back));
    MT_CHECK(!back.has_mpi && isnan(back.nominal_gflops) && isnan(back.nominal_ghz), "nulls read");
    remove(path);
}

/* Each malformed text fails with MT_EFORMAT, the path, "byte N" and what was expected. */
MT_TEST(machine_malformed) {
    const char *path = "/tmp/mt_test_profile_bad.json";
    mt_machine m = known(), back;
    MT_CHECK_OK(mt_machine_write(&m, path));
    char good[4096];
    snprintf(good, sizeof good, "%s", slurp(path));
    char text[sizeof good + 16];   /* good, and a little more */

    /* truncated in the middle */
    snprintf(text, sizeof text, "%.*s", (int)(strlen(good) / 2), good);
    write_text(path, text);
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EFORMAT, path, "byte ", "expected");

    /* a string where a number goes: "cores": "2" */
    snprintf(text, sizeof text, "%s", good);
    char *p = strstr(text, "\"cores\": 2");
    MT_CHECK(p, "cores in %s", good);
    memcpy(p, "\"cores\":\"2\"", 11);
    write_text(path, text);
    char at[32];
    snprintf(at, sizeof at, "byte %zu", (size_t)(p - text) + 8);
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EFORMAT, path, at, "a number");

    /* an unknown key */
    snprintf(text, sizeof text, "%s", good);
    p = strstr(text, "\"cores\"");
    memcpy(p, "\"coars\"", 7);
    write_text(path, text);
    snprintf(at, sizeof at, "byte %zu", (size_t)(p - text));
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EFORMAT, at, "\"coars\" is unknown", "\"cores\"");

    /* a missing key: the object closes without "measured_at" */
    MT_CHECK_FAILS((write_text(path, "{\"cpu\": \"x\"}"), mt_machine_read(path, &back)), MT_EFORMAT,
                   "byte 11", "\"cores\"");
    /* a repeated key */
    MT_CHECK_FAILS((write_text(path, "{\"cpu\": \"x\", \"cpu\": \"y\"}"), mt_machine_read(path, &back)),
                   MT_EFORMAT, "byte 13", "given twice");
    /* an integer that is not whole */
    snprintf(text, sizeof text, "%s", good);
    p = strstr(text, "\"size\": 4096");
    memcpy(p, "\"size\": 40.5", 12);
    write_text(path, text);
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EFORMAT, "a whole number");
    /* something after the object */
    snprintf(text, sizeof text, "%s x", good);
    write_text(path, text);
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EFORMAT, "the end of the file");
    /* not there at all */
    remove(path);
    MT_CHECK_FAILS(mt_machine_read(path, &back), MT_EIO, path);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
