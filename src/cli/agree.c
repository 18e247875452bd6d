/*
 * agree.c — under mpirun, the ranks agree on the start-up checks before any
 * of them starts the work (files.h's cli_agree_start).
 *
 * Every rank runs the same command, but not on the same host: an input
 * missing on one host, or an output another run is writing (which only
 * rank 0, the writer, can see), fails the checks of one rank alone. Without
 * this, that rank exited and the others went on into the first collective
 * until mpirun killed them ("mpirun detected that one or more processes
 * exited with non-zero status", and nothing from meshtrain on the others).
 * Here every rank all-gathers its exit code over the world (one int32 per
 * rank, a 1-axis launch of the mpi transport, so under MT_COMM_TIMEOUT) and
 * all return the same one: rank 0's when it failed, else the lowest failing
 * rank's, which rank 0 names.
 */
#include "cli/files.h"
#include "cli/args.h"
#include "meshtrain.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int32_t  mine;   /* this rank's exit code */
    int32_t *all;    /* (world) every rank's, in rank order */
} agree_arg;

static mt_status agree_device(mt_ctx *ctx, void *arg) {
    agree_arg *a = arg;
    mt_axes ax;
    mt_status st = mt_ctx_axes(ctx, "rank", &ax);
    return st != MT_OK ? st : mt_all_gather(ctx, ax, &a->mine, a->all, 1, MT_I32);
}

int cli_agree_start(int rc, bool on_mpi) {
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    if (!on_mpi || world <= 1) return rc;
    agree_arg a = {.mine = rc, .all = calloc((size_t)world, sizeof(int32_t))};
    if (!a.all) {
        cli_error("out of memory for the start-up agreement of %d ranks", world);
        return CLI_EXIT_FAIL;
    }
    mt_status st = mt_pmap("rank", 0, agree_device, &a);
    if (st != MT_OK) {
        cli_error("rank %d: the ranks could not agree that every one may start: %s", rank,
                  mt_errmsg());
        free(a.all);
        return rc != CLI_EXIT_OK ? rc : CLI_EXIT_FAIL;
    }
    int failed = -1;
    for (int r = 0; r < world && failed < 0; r++)
        if (a.all[r] != CLI_EXIT_OK) failed = r;
    int agreed = failed < 0 ? CLI_EXIT_OK : (int)a.all[failed];
    if (rank == 0 && failed > 0)
        cli_error("rank %d of %d failed its start-up checks (its message is above, from its host; "
                  "exit %d), so no rank starts", failed, world, agreed);
    free(a.all);
    return agreed;
}
