/*
 * linreg.c — linear regression, pred = x·w + b with an MSE loss, built only
 * through the public graph API.
 */
#include "meshtrain/models.h"

mt_tensor *mt_linreg_build(mt_graph *g, int B, int n_features, float loss_scale) {
    if (!g) { mt_fail(MT_EINVAL, "mt_linreg_build needs a graph (got NULL)"); return NULL; }
    if (B <= 0 || n_features <= 0) {
        mt_graph_fail(g, MT_EINVAL, "linear regression sizes B=%d n_features=%d must be positive",
                B, n_features);
        return NULL;
    }
    const mt_init zeros = {MT_INIT_ZEROS, 0.0f};
    const int64_t xs[2] = {B, n_features}, ys[1] = {B}, ws[1] = {n_features}, bs[1] = {1};
    const int64_t w_row[2] = {1, n_features}, col[2] = {B, 1};
    mt_tensor *x = mt_graph_logical(g, mt_input(g, "x", MT_F32, 2, xs), "batch");
    mt_tensor *y = mt_graph_logical(g, mt_input(g, "y", MT_F32, 1, ys), "batch");
    mt_tensor *w = mt_param(g, "w", 1, ws, zeros);                  /* (n_features) */
    mt_tensor *b = mt_param(g, "b", 1, bs, zeros);                  /* (1) */
    /* w as a one-output linear layer: (B,n_features) · (1,n_features)ᵀ + b -> (B,1),
     * compared with y viewed as (B,1) */
    mt_tensor *pred = mt_linear(g, x, mt_reshape(g, w, 2, w_row), b);
    return mt_mse(g, pred, mt_reshape(g, y, 2, col), loss_scale);
}
