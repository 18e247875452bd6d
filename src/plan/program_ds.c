/*
 * program_ds.c — DeepSpeed ZeRO-3's parameter collectives as its code runs
 * them, applied to the program the planner built (cache.c, under the
 * deepspeed convention): which uses of a parameter fetch it (every
 * release: its PartitionedParameterCoordinator's hooks and reuse
 * distance), and how each collective runs (0.3.13 to 0.5.4: one
 * synchronous list-form collective a parameter).
 */
#include "plan/plan_impl.h"

#include <stdlib.h>
#include <string.h>

/* DeepSpeed's stage3_param_persistence_threshold default: 100000 elements
 * (deepspeed/runtime/zero/constants.py,
 * ZERO_OPTIMIZATION_PARAM_PERSISTENCE_THRESHOLD_DEFAULT, the same at v0.3.13,
 * v0.4.0 and v0.5.4): smaller parameters are never released, so never
 * gathered again. */
#define MT__PLAN_DS_PERSIST 100000.0

/* DeepSpeed's stage3_max_reuse_distance default: 1e9 elements
 * (deepspeed/runtime/zero/constants.py,
 * ZERO_OPTIMIZATION_MAX_REUSE_DISTANCE_DEFAULT, v0.3.13 to today): a
 * module's parameters are not released after a use when the parameters of
 * the module uses between it and the module's next use in the step's trace
 * add up to fewer elements (stage3.py's _keep_for_later and
 * get_reuse_distance_in_numel; a use's own module not counted). */
#define MT__PLAN_DS_REUSE 1e9

/* A use of a parameter in the order DeepSpeed's hooks see it. */
typedef struct {
    int    param;
    double elems;
} ds_use;

/* Whether n fetches a parameter of the program's (a gather at each use:
 * ZeRO-3, fsdp), and its elements (comm_bytes after traffic16: 2 bytes an
 * element). */
static bool fetches(const mt__plan_node *n) {
    return n->cls == MT__PN_COLLECTIVE && n->param_gather && !n->once && n->param >= 0 &&
           !n->overlapped;
}

typedef struct {
    ds_use *use;   /* (n) */
    int     n, cap;
} ds_trace;

static bool push(ds_trace *t, const mt__plan_node *n) {
    if (t->n == t->cap) return false;
    t->use[t->n++] = (ds_use){n->param, n->comm_bytes / 2};
    return true;
}

/* The step's trace, as PyTorch runs a checkpointed model's modules and
 * DeepSpeed's hooks fetch their parameters: the forward's uses in the
 * program's order; then the backward's, each block's (last block first) in
 * its forward order again when the block is recomputed (CheckpointFunction
 * runs the block's forward again, its modules' forward hooks fetch), then
 * in reverse (the backward hooks, gradient order); the parameters outside
 * blocks (embedding, final norm) where the program reads them, before the
 * last block (the head) or after the first (the embedding). */
static void build_trace(const mt__plan_program *p, int n_blocks, const bool *recomputed,
                        ds_trace *t) {
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].phase == 'F' && fetches(&p->nodes[i])) push(t, &p->nodes[i]);
    int first_block_use = p->n_nodes;
    for (int i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].phase != 'F' && fetches(&p->nodes[i]) && p->nodes[i].block >= 0) {
            first_block_use = i;
            break;
        }
    for (int i = 0; i < first_block_use; i++)
        if (p->nodes[i].phase != 'F' && fetches(&p->nodes[i])) push(t, &p->nodes[i]);
    for (int b = n_blocks - 1; b >= 0; b--) {
        if (recomputed[b])
            for (int i = 0; i < p->n_nodes && p->nodes[i].phase == 'F'; i++)
                if (p->nodes[i].block == b && fetches(&p->nodes[i])) push(t, &p->nodes[i]);
        for (int i = p->n_nodes - 1; i >= 0; i--)
            if (p->nodes[i].phase == 'F' && p->nodes[i].block == b && fetches(&p->nodes[i]))
                push(t, &p->nodes[i]);
    }
    for (int i = first_block_use; i < p->n_nodes; i++)
        if (p->nodes[i].phase != 'F' && fetches(&p->nodes[i]) && p->nodes[i].block < 0)
            push(t, &p->nodes[i]);
}

mt_status mt__plan_program_ds_fetches(mt__plan_program *p, bool full_remat) {
    int n_blocks = 0, n_params = 0, n_uses = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const mt__plan_node *n = &p->nodes[i];
        if (n->block >= n_blocks) n_blocks = n->block + 1;
        if (!fetches(n)) continue;
        if (n->param >= n_params) n_params = n->param + 1;
        n_uses += n->phase == 'F' ? 3 : 1;   /* a forward gather: the recomputed forward's
                                                and the backward's uses too */
    }
    if (n_uses == 0) return MT_OK;
    bool *recomputed = calloc((size_t)n_blocks + 1, sizeof *recomputed);
    int *last = malloc(((size_t)n_blocks + 1) * sizeof *last);   /* (n_blocks) last recomputed node */
    int *seen = malloc(((size_t)n_params + 1) * sizeof *seen);   /* (n_params) its last use */
    int *b_fetch = calloc((size_t)n_params + 1, sizeof *b_fetch);   /* backward fetches */
    double *before = malloc(((size_t)n_uses + 1) * sizeof *before);   /* elements before use k */
    ds_trace t = {malloc(((size_t)n_uses + 1) * sizeof *t.use), 0, n_uses};
    mt__plan_node *nodes = NULL;
    mt_status st = MT_OK;
    if (!recomputed || !last || !seen || !b_fetch || !before || !t.use) {
        st = mt_fail(MT_ENOMEM, "out of memory for DeepSpeed's fetches of %d parameters",
                     n_params);
        goto done;
    }
    for (int b = 0; b < n_blocks; b++) last[b] = -1;
    for (int i = 0; i < p->n_nodes; i++)
        if (full_remat && p->nodes[i].phase == 'B' && p->nodes[i].recompute &&
            p->nodes[i].block >= 0) {
            recomputed[p->nodes[i].block] = true;
            last[p->nodes[i].block] = i;
        }
    build_trace(p, n_blocks, recomputed, &t);
    /* each use fetches unless the parameter's previous use is nearer than
       the reuse distance; count the backward's fetches a parameter */
    int n_forward = 0;
    for (int i = 0; i < p->n_nodes; i++)
        n_forward += p->nodes[i].phase == 'F' && fetches(&p->nodes[i]);
    for (int q = 0; q < n_params; q++) seen[q] = -1;
    before[0] = 0;
    for (int k = 0; k < t.n; k++) {
        const ds_use *u = &t.use[k];
        before[k + 1] = before[k] + u->elems;
        const int j = seen[u->param];
        const bool fetch = j < 0 || before[k] - before[j + 1] >= MT__PLAN_DS_REUSE;
        if (fetch && k >= n_forward) b_fetch[u->param]++;
        seen[u->param] = k;
    }
    /* the program: a parameter's first backward gather kept when the
       backward fetches it, dropped when not; a second fetch (a recomputed
       block's module released after its recomputed forward) gathered again
       after the block's last recomputed node, or after the first where that
       comes later */
    int extra = 0;
    for (int q = 0; q < n_params; q++) extra += b_fetch[q] > 1;
    nodes = malloc(((size_t)p->n_nodes + (size_t)extra + 1) * sizeof *nodes);
    if (!nodes) {
        st = mt_fail(MT_ENOMEM, "out of memory for %d nodes", p->n_nodes + extra);
        goto done;
    }
    for (int q = 0; q < n_params; q++) seen[q] = 0;   /* backward gathers placed so far */
    int k = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const mt__plan_node *n = &p->nodes[i];
        const bool gather = n->phase != 'F' && fetches(n);
        if (gather && (seen[n->param] > 0 || b_fetch[n->param] == 0)) continue;
        nodes[k++] = *n;
        if (gather) {
            seen[n->param] = 1;
            const bool later = n->block < 0 || last[n->block] < i;
            if (b_fetch[n->param] > 1 && later) {
                nodes[k] = *n;
                nodes[k++].recompute = false;
                seen[n->param] = 2;
            }
        }
        if (n->phase != 'B' || n->block < 0 || last[n->block] != i) continue;
        /* the block's second fetches, in gradient order */
        for (int j = i - 1; j >= 0; j--) {
            const mt__plan_node *g = &p->nodes[j];
            if (g->phase == 'F' || !fetches(g) || g->block != n->block ||
                b_fetch[g->param] < 2 || seen[g->param] != 1)
                continue;
            nodes[k] = *g;
            nodes[k++].recompute = false;
            seen[g->param] = 2;
        }
    }
    free(p->nodes);
    p->nodes = nodes;
    p->n_nodes = k;
done:
    free(recomputed), free(last), free(seen), free(b_fetch), free(before), free(t.use);
    return st;
}

/* The sources (DeepSpeed at v0.3.13 to v0.5.4, PyTorch 1.8):
 * deepspeed/runtime/zero/partition_parameters.py's _allgather_param (one
 * a parameter: stage3.py's fetch_sub_module and prefetch call _all_gather
 * with async_op=True, which loops over the parameters) runs
 * torch.cuda.synchronize() before each gather (v0.3.13 line 611) and
 * hands torch.distributed.all_gather a list of world-size views; its
 * _reduce_scatter_gradient hands torch.distributed.reduce_scatter one
 * (v0.3.13 line 766, one a parameter). PyTorch's ProcessGroupNCCL
 * (torch/lib/c10d/ProcessGroupNCCL.cpp, 1.8) gathers into a flat buffer
 * and copies each rank's part out with its own copy_, and copies each
 * input in before a reduce-scatter. DeepSpeed PR #1188 (commit c0eeb69,
 * first in v0.5.5) says both: "the async version is not async at all,
 * because each all_gather calls torch.cuda.synchronize()", and
 * torch.distributed.all_gather "will do implicit memcpy at the end of
 * each ncclAllgather"; it moved to _all_gather_base (one flat buffer).
 * After each optimizer step stage3.py's _post_step gathers the persistent
 * parameters again (v0.3.13 line 2344), in one list-form all_gather of
 * their partitions, then copies each parameter's part of each rank out
 * (_allgather_params' loop, a copy_ a parameter and rank). */
void mt__plan_program_list_collectives(mt__plan_program *p) {
    for (int i = 0; i < p->n_nodes; i++) {
        mt__plan_node *n = &p->nodes[i];
        if (n->cls != MT__PN_COLLECTIVE || n->once || n->overlapped) continue;
        if (n->param_gather) {
            if (n->comm_bytes / 2 < MT__PLAN_DS_PERSIST) {
                if (n->phase == 'F') {   /* each parameter's first use */
                    p->ds_persist_params += 1;
                    p->ds_persist_bytes += n->comm_bytes;
                    p->ds_persist_axes = n->axes;
                }
                n->comm_bytes = 0;   /* persistent: kept whole, never gathered */
                continue;
            }
            n->param_gather = false;   /* synchronous: blocking */
            n->rank_copies = true;
        } else if (n->grad_reduce && n->kind == MT__PC_REDUCE_SCATTER) {
            n->rank_copies = true;
        }
    }
}
