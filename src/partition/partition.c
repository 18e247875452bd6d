/*
 * partition.c — the partitioner (mt_partition): placeholder until it lands.
 */
#include "meshtrain/partition.h"

mt_status mt_partition(mt_graph *global, mt_tensor *loss, mt_ctx *ctx,
                       const mt_partition_opts *opts, mt_graph **local, mt_tensor **local_loss) {
    (void)global; (void)loss; (void)ctx; (void)opts;
    *local = NULL;
    *local_loss = NULL;
    return mt_fail(MT_EUNSUPPORTED, "mt_partition: not built yet");
}
