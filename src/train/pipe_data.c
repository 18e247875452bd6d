/*
 * pipe_data.c — a pipeline's data on one device (pipe_data.h).
 */
#include "train/pipe_data.h"

#include "graph/tensor_data.h"

#include <stdlib.h>
#include <string.h>

mt_status mt__pipe_data_init(mt__pipe_data *pd, const mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    memset(pd, 0, sizeof *pd);
    pd->m = c->accum;
    pd->B = c->B;
    pd->T = tr->m->about.sequences ? c->T : 1;
    /* (fill_batch writes one 4-byte element a token, or an example's worth
     * for models without sequences, which no pipeline builds) */
    pd->mb = (size_t)mt__microbatch_size(tr->m, c) * 4;
    pd->in = malloc((size_t)pd->m * pd->mb);
    pd->target = malloc((size_t)pd->m * pd->mb);
    pd->scratch = malloc(pd->mb);
    if (c->doc_mask) pd->docs = malloc((size_t)pd->m * pd->mb);
    if (!pd->in || !pd->target || !pd->scratch || (c->doc_mask && !pd->docs))
        return mt_fail(MT_ENOMEM, "out of memory for the pipeline's %d microbatches of %zu "
                       "bytes", pd->m, pd->mb);
    return MT_OK;
}

void mt__pipe_data_free(mt__pipe_data *pd) {
    free(pd->in);
    free(pd->target);
    free(pd->docs);
    free(pd->scratch);
    memset(pd, 0, sizeof *pd);
}

mt_status mt__pipe_data_fill(mt__pipe_data *pd, const mt_trainer *tr, int split, int64_t *pos,
                             int n) {
    const mt_train_config *c = &tr->cfg;
    mt_status s = MT_OK;
    for (int j = 0; j < n && s == MT_OK; j++) {
        char *in = (char *)pd->in + (size_t)j * pd->mb;
        s = tr->m->fill_batch(c, tr->ds, split, pos, 0, c->B, in,
                              (char *)pd->target + (size_t)j * pd->mb);
        if (s == MT_OK && pd->docs)
            mt_dataset_doc_ids((const int32_t *)in, pd->B, pd->T, mt__train_eot_id(tr),
                               pd->docs + (size_t)j * (pd->mb / 4));
    }
    return s;
}

mt_status mt__pipe_data_feed(mt__pipe_data *pd, mt_ctx *ctx, int mb, mt__pipe_input what,
                             mt_tensor *t) {
    if (!t) return MT_OK;
    const void *whole = what == MT__PIPE_TOKENS ? pd->in : what == MT__PIPE_TARGETS
                                                               ? pd->target : (void *)pd->docs;
    if (!whole)
        return mt_fail(MT_EINTERNAL, "a pipeline stage takes document ids, but the run "
                       "makes none (doc_mask is off)");
    const char *src = (const char *)whole + (size_t)mb * pd->mb;
    const int64_t n = mt_tensor_numel(t);
    int r = 0, parts, part;
    if (ctx) r = mt_axis_index(ctx, mt__batch_axes(mt_ctx_mesh(ctx)));
    mt__train_seq_split(ctx, t, &parts, &part);
    /* the device's block of rows: n·parts elements (whole rows) each */
    src += (size_t)r * (size_t)n * (size_t)parts * 4;
    if (parts < 2) return mt_tensor_write(t, src, 0, n);
    const int64_t T = mt_tensor_dim(t, 1);
    mt__train_headtail_rows(pd->scratch, src, n / T, T, parts, part);
    return mt_tensor_write(t, pd->scratch, 0, n);
}
