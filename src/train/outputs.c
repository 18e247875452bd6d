/*
 * outputs.c — the files a training run writes (checkpoint, llm.c checkpoint,
 * trace), claimed when the trainer is created and held until it is freed
 * (meshtrain/files.h): a second run given one of the same outputs is refused
 * at its start, with a message saying another run is writing it, instead of
 * both training for hours and then deleting each other's temporary files.
 * Under MPI rank 0 writes every file (the others send it their part), so it
 * alone claims them.
 */
#include "train/train_impl.h"

bool mt__train_writes_files(const mt_trainer *tr) {
    if (!tr->on_mesh || mt_transport_resolve(tr->cfg.transport) != MT_TRANSPORT_MPI) return true;
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    return rank == 0;
}

mt_status mt__train_claim_outputs(mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    if (!mt__train_writes_files(tr)) return MT_OK;
    mt_status s = MT_OK;
    if (c->ckpt_out) s = mt_output_claim(c->ckpt_out, "checkpoint", &tr->out_ckpt);
    if (s == MT_OK && c->llmc_out) s = mt_output_claim(c->llmc_out, "llm.c checkpoint", &tr->out_llmc);
    if (s == MT_OK && c->trace) s = mt_output_claim(c->trace, "trace", &tr->out_trace);
    if (s != MT_OK) mt__train_release_outputs(tr);
    return s;
}

void mt__train_release_outputs(mt_trainer *tr) {
    mt_output_close(tr->out_ckpt);
    mt_output_close(tr->out_llmc);
    mt_output_close(tr->out_trace);
    tr->out_ckpt = tr->out_llmc = tr->out_trace = NULL;
}
