/*
 * rules.c — a strategy as data: every leaf of a global graph that names its
 * logical axes gets the sharding a rule table gives it (sharding.h,
 * mt_rules_sharding), every op output that names them the same as its
 * constraint (mt_tensor_set_constraint), a reshard whose output names
 * them that layout as its target, and a varies node the mesh axes of its
 * logical axis, before mt_partition. The trainer's
 * strategies are rows of such tables (train/presets.c); a program of one's
 * own can pass its table here the same way.
 */
#include "graph/graph_impl.h"
#include "meshtrain/partition.h"
#include "mesh/mesh_impl.h"

#include <string.h>

mt_status mt_graph_shard_by_rules(mt_graph *g, const mt_rules *rules, const mt_mesh *mesh) {
    if (!g || !rules || !mesh)
        return mt_fail(MT_EINVAL, "mt_graph_shard_by_rules: graph, rules or mesh is NULL");
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of) continue;
        bool named = false;
        for (int d = 0; d < t->ndim; d++) named |= t->logical[d][0] != '\0';
        if (!named) continue;
        mt_sharding sh;
        mt_status s = mt_rules_sharding(rules, mesh, t, &sh);
        bool leaf = t->kind == MT_INPUT || t->kind == MT_PARAM || t->kind == MT_CONST;
        if (s == MT_OK)
            s = leaf ? mt_tensor_set_sharding(t, &sh) : mt_tensor_set_constraint(t, &sh);
        if (s != MT_OK) return s;
    }
    /* a reshard whose output names logical axes goes to the layout they
     * give (MaxText's with_logical_constraint): a builder moves its value
     * so without knowing the mesh */
    for (int i = 0; i < g->n_forward; i++) {
        mt_op_call *c = &g->nodes[i].call;
        if (c->op == MT_OP_VARIES) {   /* the mesh axes of its logical axis, size > 1 */
            const char *axes = mt_rules_find(rules, c->p.varies.logical);
            c->p.varies.axes = 0;
            for (const char *a = axes; a && *a;) {
                size_t len = strcspn(a, "+");
                int k = mt__mesh_find_axis(mesh, a, len);
                if (k >= 0 && mesh->sizes[k] > 1) c->p.varies.axes |= 1u << k;
                a += len + (a[len] == '+');
            }
            continue;
        }
        bool named = false;
        for (int d = 0; c->op == MT_OP_RESHARD && d < c->out->ndim; d++)
            named |= c->out->logical[d][0] != '\0';
        if (!named) continue;
        mt_status s = mt_rules_sharding(rules, mesh, c->out, &c->p.reshard);
        if (s != MT_OK) return s;
    }
    return MT_OK;
}
