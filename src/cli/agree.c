/*
 * agree.c — under mpirun, the ranks of `train` agree before any of them
 * starts the work (files.h's cli_agree_train): on the start-up checks, and
 * on the settings every rank must share (the record and its comparison are
 * agree_config.c's).
 *
 * Every rank runs the same command, but not on the same host: an input
 * missing on one host, or an output another run is writing (which only
 * rank 0, the writer, can see), fails the checks of one rank alone. Without
 * this, that rank exited and the others went on into the first collective
 * until mpirun killed them ("mpirun detected that one or more processes
 * exited with non-zero status", and nothing from meshtrain on the others).
 * Here every rank all-gathers its exit code over the world (a 1-axis launch
 * of the mpi transport, so under MT_COMM_TIMEOUT) and all return the same
 * one: rank 0's when it failed, else the lowest failing rank's, which rank
 * 0 names.
 *
 * Nor is every rank's command the same one: an MPMD launch (`mpirun -np 1
 * meshtrain train A : -np 1 meshtrain train B`), a wrapper script that adds
 * a flag by rank, a host with another copy of the data. A rank with other
 * model sizes desynchronised the collectives (Open MPI aborted with
 * MPI_ERR_TRUNCATE, exit 15), one with fewer --steps exited 0 and left the
 * others waiting for the timeout, and one with another --seed or --lr
 * trained a diverging replica and exited 0. So the same exchange carries
 * the hash of each rank's settings, and when they differ the ranks gather
 * the settings themselves, so that rank 0 can name the first that differs.
 * Both gathers are in one launch: every rank sees the same hashes, so all
 * take the second gather or none do.
 */
#include "cli/files.h"
#include "cli/args.h"
#include "meshtrain.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_RC, SLOT_LEN, SLOT_HASH_LO, SLOT_HASH_HI, SLOTS };   /* int32s a rank sends */

typedef struct {
    int32_t     mine[SLOTS];   /* this rank's exit code, record length and hash */
    int32_t    *all;           /* (world, SLOTS) every rank's, in rank order */
    const char *text;          /* this rank's record, or NULL */
    int         world;
    int32_t    *texts;         /* (world, words) every rank's record, when they differ */
    int         words;
} agree_arg;

static bool all_passed(const agree_arg *a) {
    for (int r = 0; r < a->world; r++)
        if (a->all[r * SLOTS + SLOT_RC] != CLI_EXIT_OK) return false;
    return true;
}

/* Whether rank r's record has rank 0's hash (not its length: what is
 * shown, such as the data's path, may differ). */
static bool same_as_rank0(const agree_arg *a, int r) {
    return a->all[r * SLOTS + SLOT_HASH_LO] == a->all[SLOT_HASH_LO] &&
           a->all[r * SLOTS + SLOT_HASH_HI] == a->all[SLOT_HASH_HI];
}

static mt_status agree_device(mt_ctx *ctx, void *arg) {
    agree_arg *a = arg;
    mt_axes ax;
    mt_status st = mt_ctx_axes(ctx, "rank", &ax);
    if (st == MT_OK) st = mt_all_gather(ctx, ax, a->mine, a->all, SLOTS, MT_I32);
    if (st != MT_OK || !all_passed(a)) return st;   /* a failed check comes first */
    bool differ = false;
    int32_t longest = 0;
    for (int r = 0; r < a->world; r++) {
        differ |= !same_as_rank0(a, r);
        if (a->all[r * SLOTS + SLOT_LEN] > longest) longest = a->all[r * SLOTS + SLOT_LEN];
    }
    if (!differ) return MT_OK;
    /* the records, padded to the longest (+1: a NUL ends each) */
    a->words = (int)((longest + 1 + 3) / 4);
    int32_t *mine = calloc((size_t)a->words, sizeof(int32_t));
    a->texts = calloc((size_t)a->world * (size_t)a->words, sizeof(int32_t));
    if (!mine || !a->texts) {
        free(mine);
        return mt_fail(MT_ENOMEM, "out of memory for the settings of %d ranks (%d bytes each)",
                       a->world, (int)longest);
    }
    if (a->text) memcpy(mine, a->text, (size_t)a->mine[SLOT_LEN]);
    st = mt_all_gather(ctx, ax, mine, a->texts, (size_t)a->words, MT_I32);
    free(mine);
    return st;
}

/* Rank 0's line for records that differ: the first setting that differs
 * between rank 0 and the lowest rank that differs, and how many differ. */
static void name_difference(const agree_arg *a) {
    const char *text0 = (const char *)a->texts;
    int first = -1, n_differ = 0;
    char what[1024] = "";
    for (int r = 1; r < a->world; r++) {
        const char *t = (const char *)(a->texts + (size_t)r * (size_t)a->words);
        char msg[1024];
        if (!same_as_rank0(a, r) && cli_agree_record_diff(text0, t, r, msg, sizeof msg)) {
            n_differ++;
            if (first < 0) {
                first = r;
                memcpy(what, msg, sizeof what);
            }
        }
    }
    if (first < 0)   /* the hashes differ, the texts not: cannot be, but say so */
        snprintf(what, sizeof what, "their settings (the same text, another hash)");
    char more[64] = "";
    if (n_differ > 1)
        snprintf(more, sizeof more, " (%d of the %d ranks differ from rank 0)", n_differ, a->world);
    cli_error("the ranks disagree on %s%s; every rank must run the same command (mpirun -np %d "
              "meshtrain train ... with the same flags on every rank)", what, more, a->world);
}

/* The exchange: rc and, with a record, the settings. */
static int agree(int rc, const cli_agree_record *rec) {
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    uint64_t hash = rec ? rec->hash : 0;
    agree_arg a = {.mine = {rc, rec ? (int32_t)rec->len : 0, (int32_t)(uint32_t)hash,
                            (int32_t)(uint32_t)(hash >> 32)},
                   .all = calloc((size_t)world * SLOTS, sizeof(int32_t)),
                   .text = rec ? rec->text : NULL, .world = world};
    if (!a.all) {
        cli_error("out of memory for the start-up agreement of %d ranks", world);
        return CLI_EXIT_FAIL;
    }
    mt_status st = mt_pmap("rank", 0, agree_device, &a);
    if (st != MT_OK) {
        cli_error("rank %d: the ranks could not agree that every one may start: %s", rank,
                  mt_errmsg());
        free(a.all);
        free(a.texts);
        return rc != CLI_EXIT_OK ? rc : CLI_EXIT_FAIL;
    }
    int failed = -1;
    for (int r = 0; r < world && failed < 0; r++)
        if (a.all[r * SLOTS + SLOT_RC] != CLI_EXIT_OK) failed = r;
    int agreed = failed < 0 ? CLI_EXIT_OK : (int)a.all[failed * SLOTS + SLOT_RC];
    if (rank == 0 && failed > 0)
        cli_error("rank %d of %d failed its start-up checks (its message is above, from its host; "
                  "exit %d), so no rank starts", failed, world, agreed);
    if (failed < 0 && a.texts) {   /* every rank got the records: the settings differ */
        if (rank == 0) name_difference(&a);
        agreed = CLI_EXIT_USAGE;
    }
    free(a.all);
    free(a.texts);
    return agreed;
}

int cli_agree_train(int rc, const mt_train_config *cfg, const char *tokenizer) {
    int world = 1;
    mt_launcher_world(NULL, &world);
    /* with or without a mesh: a rank without one would train alone while
     * the others wait for it */
    if (world <= 1 || mt_transport_resolve(cfg->transport) != MT_TRANSPORT_MPI) return rc;
    if (rc != CLI_EXIT_OK) return agree(rc, NULL);   /* a failed check comes first: no record */
    cli_agree_record rec;
    if (cli_agree_record_make(cfg, tokenizer, world, &rec) != CLI_EXIT_OK) {
        cli_error("out of memory for the record of this rank's settings");
        return agree(CLI_EXIT_FAIL, NULL);   /* still in the exchange: nobody waits */
    }
    rc = agree(rc, &rec);
    cli_agree_record_free(&rec);
    return rc;
}
