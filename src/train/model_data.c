/*
 * model_data.c — what the models trained on a token dataset check of it
 * (train_impl.h: mt__train_data_fits), below their table entries
 * (model_table.c, model_llama.c), which both call it, and how they cut
 * their batches (mt__train_fill_tokens: a device reads only its rows).
 */
#include "train/train_impl.h"

/* Shards are split by their names, val_frac does not apply to them (the CLI
 * refuses --val-frac with shards): an evaluation without a val shard, or
 * with too few tokens in them, says what to do with the shards, before the
 * trainer's general check would point at val_frac. */
static mt_status eval_shards_fit(const mt_train_config *c, const mt_dataset *ds) {
    if (c->eval_every <= 0 || !mt_dataset_is_sharded(c->data)) return MT_OK;
    if (mt_dataset_files(ds, 1) == 0)
        return mt_fail(MT_EINVAL, "eval_every=%d (--eval-every) evaluates on the validation "
                       "split, and the shards of %s have none: no *_val_*.bin file (llm.c's "
                       "data scripts write the first shard as <name>_val_000000.bin); add a "
                       "*_val_* shard beside the train shards, or set eval_every to 0 (drop "
                       "--eval-every). val_frac does not split shards", c->eval_every, c->data);
    int64_t n_val = mt_dataset_tokens(ds, 1);
    if (n_val < (int64_t)c->T + 1)
        return mt_fail(MT_EINVAL, "eval_every=%d (--eval-every) needs a validation split of at "
                       "least T+1=%d tokens, but the *_val_* shards of %s hold %lld; add tokens "
                       "to the val shards, lower T, or set eval_every to 0 (drop --eval-every)",
                       c->eval_every, c->T + 1, c->data, (long long)n_val);
    return MT_OK;
}

mt_status mt__train_data_fits(const mt_train_config *c, const mt_dataset *ds, int V) {
    int data_vocab = mt_dataset_vocab(ds);
    if (data_vocab > V)
        return mt_fail(MT_EINVAL, "data %s has tokens up to %d (vocabulary %d) but the model "
                       "has V=%d; raise V or leave it 0 to take it from the data",
                       c->data, data_vocab - 1, data_vocab, V);
    int64_t n_train = mt_dataset_tokens(ds, 0);
    if (n_train < (int64_t)c->T + 1)
        return mt_fail(MT_EINVAL, "the training split of %s has %lld tokens, fewer than "
                       "T+1=%d; use more data or a shorter T", c->data, (long long)n_train,
                       c->T + 1);
    return eval_shards_fit(c, ds);
}

mt_status mt__train_fill_tokens(const mt_train_config *c, const mt_dataset *ds, int split,
                                int64_t *pos, int row0, int rows, void *in, void *target) {
    return mt_dataset_rows(ds, split, pos, c->B, c->T, row0, rows, in, target);
}

int mt__train_scan_vocab(const mt_train_config *c, int V) {
    return c->data && mt_dataset_is_sharded(c->data) ? V : 0;
}

mt_status mt__train_needs_data(const mt_train_config *c, const char *who) {
    if (!c->data || !c->data[0])
        return mt_fail(MT_EINVAL, "%s training needs data: set data to a text file or an "
                       "llm.c token file", who);
    if (!(c->val_frac >= 0.0 && c->val_frac < 1.0))
        return mt_fail(MT_EINVAL, "val_frac=%g must be in [0, 1)", c->val_frac);
    return MT_OK;
}
