/*
 * bench_machine.h — what `bench machine` (cmd_bench_machine.c) and
 * `bench matmul` (cmd_bench_matmul.c) share, and their entry points, which
 * cmd_bench.c's dispatcher calls.
 */
#ifndef MT_CLI_BENCH_MACHINE_H
#define MT_CLI_BENCH_MACHINE_H

#include "meshtrain.h"

#include <stddef.h>

/* `meshtrain bench machine ...` and `meshtrain bench matmul ...`; argv[0]
 * is the benchmark's name. They return an exit code (CLI_EXIT_*). */
int cli_bench_machine(int argc, char **argv);
int cli_bench_matmul(int argc, char **argv);

/* The machine file's default path: machine.json in the folder of the running
 * meshtrain binary (the build folder), or "machine.json" when that folder is
 * unknown. */
void cli_machine_default_path(char *buf, size_t n);

/* The machine file a command's --machine names (`path`; it must read), or
 * else the default one when it is there and reads: *found says whether one
 * was read into *out, and `used` (n bytes) gets the path read or looked
 * at (the default one when none was found). Both are read by
 * mt_machine_read (regular files of at most 1 MiB, never blocking). A
 * default file that is there but does not read is not used, with one
 * warning line on stderr saying why. False, after printing the error, only
 * when a named file cannot be read. */
bool cli_machine_load(const char *path, mt_machine *out, bool *found, char *used, size_t n);

/* oneDNN's effective ISA (the one its bf16 products run), as
 * ONEDNN_MAX_CPU_ISA spells it ("avx512_core_amx", "avx2"), into buf (n
 * bytes); "none" in a build without oneDNN. */
void cli_onednn_isa(char *buf, size_t n);

#endif /* MT_CLI_BENCH_MACHINE_H */
