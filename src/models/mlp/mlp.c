/*
 * mlp.c — a multi-layer perceptron with GELU between layers and an MSE loss,
 * built only through the public graph API.
 */
#include "meshtrain/models.h"

#include <math.h>
#include <stdio.h>

mt_tensor *mt_mlp_build(mt_graph *g, int B, int n_in, int n_hidden, int n_out, int n_layers,
                        float loss_scale) {
    if (!g) { mt_fail(MT_EINVAL, "mt_mlp_build needs a graph (got NULL)"); return NULL; }
    if (B <= 0 || n_in <= 0 || n_out <= 0 || n_layers <= 0 || (n_layers > 1 && n_hidden <= 0)) {
        mt_graph_fail(g, MT_EINVAL, "MLP sizes B=%d n_in=%d n_hidden=%d n_out=%d n_layers=%d must be "
                "positive", B, n_in, n_hidden, n_out, n_layers);
        return NULL;
    }
    const int64_t xs[2] = {B, n_in}, ys[2] = {B, n_out};
    mt_tensor *h = mt_graph_logical(g, mt_input(g, "x", MT_F32, 2, xs), "batch");  /* (B,n_in) */
    mt_tensor *targets = mt_graph_logical(g, mt_input(g, "targets", MT_F32, 2, ys),
                                          "batch");                /* (B,n_out) */
    int64_t fan_in = n_in;
    for (int l = 0; l < n_layers; l++) {
        int64_t fan_out = l == n_layers - 1 ? n_out : n_hidden;
        /* PyTorch's nn.Linear default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)): keeps
         * activations O(1) at any width */
        const mt_init w_init = {MT_INIT_UNIFORM, 1.0f / sqrtf((float)fan_in)};
        const mt_init zeros = {MT_INIT_ZEROS, 0.0f};
        char name[MT_MAX_NAME];
        const int64_t ws[2] = {fan_out, fan_in}, bs[1] = {fan_out};
        snprintf(name, sizeof name, "fc.%d.w", l);
        mt_tensor *w = mt_param(g, name, 2, ws, w_init);            /* (fan_out,fan_in) */
        snprintf(name, sizeof name, "fc.%d.b", l);
        mt_tensor *b = mt_param(g, name, 1, bs, zeros);             /* (fan_out) */
        /* Megatron's pairs: an even layer with a layer after it widens into
         * the hidden "mlp" dim (column-parallel under mlp=tensor), the next
         * one reads it (row-parallel); a last odd layer has none */
        if (l % 2 == 0 && l + 1 < n_layers) {
            mt_graph_logical(g, w, "mlp,_");
            mt_graph_logical(g, b, "mlp");
        } else if (l % 2 == 1) {
            mt_graph_logical(g, w, "_,mlp");
        }
        h = mt_linear(g, h, w, b);                                  /* (B,fan_out) */
        if (l < n_layers - 1) h = mt_gelu(g, h);
        fan_in = fan_out;
    }
    return mt_mse(g, h, targets, loss_scale);
}
