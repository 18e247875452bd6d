/*
 * test_logical.c — strategies as data (issue 38): logical axes on a
 * model's leaves and rule tables from them to mesh axes (sharding.h), and
 * the trainer's rows over the three models' builders.
 *
 *  - mt_rules_parse / _format / _merge / _find and their refusals;
 *    mt_tensor_set_logical and its refusals, units ("heads*64");
 *  - mt_rules_sharding against a table worked out by hand: a rule's axes
 *    taken in mesh order, an axis the mesh lacks or has at size 1 left out,
 *    an axis an earlier dim took left out, a dim whose units do not divide
 *    left whole (for that axis), several axes on one dim;
 *  - the trainer's default rows (mt__train_rules) over the GPT's, the
 *    LLaMA's and the MLP's builders give, parameter by parameter, Megatron's
 *    layout as the models' per-name tables wrote it before the rows
 *    replaced them (written out here by hand: the reference), on tensor=2
 *    and data=2,tensor=2, GQA with kv heads that do and do not divide;
 *  - a user's rule replaces the row's rule of its axis only.
 * That every layout trains the one-device run is test_strategies*'s; the
 * CLI's --rules is test_rules_cli.sh's.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train/train_impl.h"

#include <string.h>

/* ======================================================================== */
/* Rule tables                                                               */
/* ======================================================================== */

MT_TEST(rules_parse_format_merge) {
    mt_rules r;
    MT_CHECK_OK(mt_rules_parse("mlp=tensor,batch=data+fsdp,embed=", &r));
    MT_CHECK(r.n == 3, "3 rules, got %d", r.n);
    MT_CHECK(!strcmp(mt_rules_find(&r, "mlp"), "tensor") &&
             !strcmp(mt_rules_find(&r, "batch"), "data+fsdp") &&
             !strcmp(mt_rules_find(&r, "embed"), "") && !mt_rules_find(&r, "heads"),
             "find: each logical axis's mesh axes");
    char buf[128];
    size_t n = mt_rules_format(&r, buf, sizeof buf);
    MT_CHECK(!strcmp(buf, "mlp=tensor,batch=data+fsdp,embed=") && n == strlen(buf),
             "format: '%s'", buf);
    mt_rules over;
    MT_CHECK_OK(mt_rules_parse("embed=fsdp,heads=tensor", &over));
    MT_CHECK_OK(mt_rules_merge(&r, &over));
    mt_rules_format(&r, buf, sizeof buf);
    MT_CHECK(!strcmp(buf, "mlp=tensor,batch=data+fsdp,embed=fsdp,heads=tensor"),
             "merge replaces embed's rule and adds heads': '%s'", buf);
    MT_CHECK_OK(mt_rules_parse("", &r));
    MT_CHECK(r.n == 0, "'' is no rule");
    static const struct { const char *text, *frag; } bad[] = {
        {"mlp", "not logical=mesh"},
        {"mlp=tensor,mlp=data", "two rules"},
        {"m-lp=tensor", "not a logical axis name"},
        {"mlp=ten sor", "not a name"},
        {"mlp=tensor++data", "not a name"},
        {"=tensor", "not a logical axis name"},
        {"a_very_long_logical_axis=tensor", "not a logical axis name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_status s = mt_rules_parse(bad[i].text, &r);
        MT_CHECK(s == MT_EINVAL && strstr(mt_errmsg(), bad[i].frag) &&
                 strstr(mt_errmsg(), bad[i].text),
                 "'%s': %s '%s', want MT_EINVAL naming it and '%s'", bad[i].text,
                 mt_status_name(s), mt_errmsg(), bad[i].frag);
    }
}

MT_TEST(logical_axes_of_a_tensor) {
    mt_graph *g = mt_graph_create();
    mt_tensor *w = mt_param(g, "w", 2, (int64_t[]){128, 32}, (mt_init){MT_INIT_ZEROS, 0});
    MT_CHECK_OK(mt_tensor_set_logical(w, "heads*64,embed"));
    MT_CHECK(!strcmp(mt_tensor_logical(w, 0), "heads") && !strcmp(mt_tensor_logical(w, 1), "embed")
             && !strcmp(mt_tensor_logical(w, 2), ""), "names: '%s' '%s'",
             mt_tensor_logical(w, 0), mt_tensor_logical(w, 1));
    MT_CHECK_OK(mt_tensor_set_logical(w, "_,embed"));
    MT_CHECK(!strcmp(mt_tensor_logical(w, 0), ""), "'_' is none");
    MT_CHECK_OK(mt_tensor_set_logical(w, ""));
    MT_CHECK(!strcmp(mt_tensor_logical(w, 1), ""), "'' clears");
    static const struct { const char *text, *frag; } bad[] = {
        {"a,b,c", "more names than"},
        {"heads,heads", "names dims 0 and 1"},
        {"heads*48,embed", "divides its size 128"},
        {"heads*0", "positive count"},
        {"he.ads", "not a name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mt_status s = mt_tensor_set_logical(w, bad[i].text);
        MT_CHECK(s == MT_EINVAL && strstr(mt_errmsg(), bad[i].frag) && strstr(mt_errmsg(), "'w'"),
                 "'%s': %s '%s', want MT_EINVAL naming 'w' and '%s'", bad[i].text,
                 mt_status_name(s), mt_errmsg(), bad[i].frag);
    }
    /* a builder's form keeps the error as the graph's */
    mt_graph_logical(g, w, "x,y,z");
    MT_CHECK(mt_graph_status(g) == MT_EINVAL, "mt_graph_logical: the graph holds the error");
    mt_graph_free(g);
}

/* mesh data=2,one=1,tensor=2,fsdp=2: bits data 1, one 2, tensor 4, fsdp 8 */
MT_TEST(sharding_from_rules_by_hand) {
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2,one=1,tensor=2,fsdp=2", 8, &mesh));
    mt_rules r;
    MT_CHECK_OK(mt_rules_parse("batch=data+fsdp,heads=tensor,mlp=tensor,embed=fsdp,"
                               "odd=tensor,solo=one,gone=pipe,wide=fsdp+data", &r));
    static const struct {
        const char *axes;
        int         ndim;
        int64_t     shape[3];
        uint32_t    want[3];
        const char *why;
    } table[] = {
        {"batch,seq", 2, {8, 16}, {1 | 8, 0}, "two axes on one dim, mesh order"},
        {"heads*4,embed", 2, {16, 32}, {4, 8}, "heads over tensor, embed over fsdp"},
        {"heads*16,embed", 2, {16, 32}, {0, 8}, "one head (16 of 16): whole"},
        {"embed,mlp", 2, {32, 64}, {8, 4}, "a row-parallel weight"},
        {"batch,embed", 2, {8, 32}, {1 | 8, 0}, "fsdp taken by batch: embed whole"},
        {"odd", 1, {3}, {0}, "3 does not divide by 2"},
        {"batch", 1, {6}, {1}, "6: data takes 2, fsdp would need 4"},
        {"solo", 1, {8}, {0}, "an axis of size 1 splits nothing"},
        {"gone", 1, {8}, {0}, "an axis the mesh lacks"},
        {"unruled,mlp", 2, {8, 8}, {0, 4}, "no rule: whole"},
        {"_,wide", 2, {4, 8}, {0, 1 | 8}, "fsdp+data in a rule: bits in mesh order"},
    };
    mt_graph *g = mt_graph_create();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%zu", i);
        mt_tensor *t = mt_input(g, name, MT_F32, table[i].ndim, table[i].shape);
        MT_CHECK_OK(mt_tensor_set_logical(t, table[i].axes));
        mt_sharding sh;
        MT_CHECK_OK(mt_rules_sharding(&r, mesh, t, &sh));
        for (int d = 0; d < table[i].ndim; d++)
            MT_CHECK(sh.dim_axes[d] == table[i].want[d], "%s (%s): dim %d over bits 0x%x, want "
                     "0x%x", table[i].axes, table[i].why, d, sh.dim_axes[d], table[i].want[d]);
    }
    mt_graph_free(g);
    mt_mesh_free(mesh);
}

/* ======================================================================== */
/* The trainer's rows over the models                                        */
/* ======================================================================== */

/* One parameter's layout: the dims split over `tensor` (a bit mask of dims). */
typedef struct {
    const char *name;
    unsigned    dims;   /* bit d: dim d over tensor */
} want_param;

/* Builds `model` (whole, B=4 T=8) and shards it by the trainer's rows on
 * `mesh`; checks that every parameter listed has its dims over tensor, and
 * every other parameter is whole. */
static void check_model(const char *mesh_spec, int devices, mt_model_kind kind, const void *mc,
                        size_t mc_size, const want_param *want, int n_want, const char *what) {
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(mesh_spec, devices, &mesh));
    mt_train_config c = mt_train_defaults();
    c.model = kind;
    c.model_config = mc;
    c.model_config_size = mc_size;
    c.B = 4;
    c.T = 8;
    c.mesh = mesh_spec;
    const mt__train_model *m = mt__train_model_of(kind);
    mt_graph *g = mt_graph_create();
    MT_CHECK(m->build(&c, g, 1.0f), "%s: build: %s", what, mt_graph_errmsg(g));
    mt_partition_opts opts;
    MT_CHECK_OK(mt__shard_program(m, &c, g, mesh, &opts));
    uint32_t tensor = 0;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (!strcmp(mt_mesh_axis_name(mesh, a), "tensor")) tensor = 1u << a;
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        unsigned dims = 0;
        const char *name = mt_tensor_name(p);
        /* a block's parameter "h.<l>.<suffix>" matches "h.*.<suffix>" */
        const char *suffix = !strncmp(name, "h.", 2) && strchr(name + 2, '.')
                                 ? strchr(name + 2, '.') + 1 : NULL;
        for (int k = 0; k < n_want; k++)
            if (!strcmp(name, want[k].name) ||
                (suffix && !strncmp(want[k].name, "h.*.", 4) && !strcmp(suffix, want[k].name + 4)))
                dims = want[k].dims;
        mt_sharding sh = mt_tensor_sharding(p);
        for (int d = 0; d < mt_tensor_ndim(p); d++) {
            bool split = (sh.dim_axes[d] & tensor) != 0, wanted = (dims >> d) & 1;
            MT_CHECK(split == wanted, "%s on %s: %s dim %d is %s over tensor, want %s", what,
                     mesh_spec, mt_tensor_name(p), d, split ? "split" : "whole",
                     wanted ? "split" : "whole");
        }
    }
    /* the batch leaves: dim 0 over data (where the mesh has it) */
    mt_tensor *in = mt_graph_find(g, m->input);
    uint32_t data = 0;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (!strcmp(mt_mesh_axis_name(mesh, a), "data")) data = 1u << a;
    MT_CHECK(mt_tensor_sharding(in).dim_axes[0] == data, "%s on %s: input '%s' dim 0 over 0x%x, "
             "want 0x%x", what, mesh_spec, m->input, mt_tensor_sharding(in).dim_axes[0], data);
    mt_graph_free(g);
    mt_mesh_free(mesh);
}

/* The layouts the models' per-name tables gave (model_table.c and
 * model_llama.c before the rows), written out by hand. */
static const want_param GPT_WANT[] = {
    {"wte", 1}, {"h.*.attn.qkv.w", 2}, {"h.*.attn.qkv.b", 2}, {"h.*.attn.proj.w", 2},
    {"h.*.mlp.fc.w", 1}, {"h.*.mlp.fc.b", 1}, {"h.*.mlp.proj.w", 2},
};
static const want_param LLAMA_WANT[] = {   /* kv heads that divide */
    {"tok_emb.w", 1}, {"lm_head.w", 1}, {"h.*.attn.wq.w", 1}, {"h.*.attn.wk.w", 1},
    {"h.*.attn.wv.w", 1}, {"h.*.attn.wo.w", 2}, {"h.*.ffn.w1.w", 1}, {"h.*.ffn.w3.w", 1},
    {"h.*.ffn.w2.w", 2},
};
static const want_param LLAMA_MQA_WANT[] = {   /* one kv head: k and v whole */
    {"tok_emb.w", 1}, {"lm_head.w", 1}, {"h.*.attn.wq.w", 1}, {"h.*.attn.wo.w", 2},
    {"h.*.ffn.w1.w", 1}, {"h.*.ffn.w3.w", 1}, {"h.*.ffn.w2.w", 2},
};
static const want_param MLP5_WANT[] = {   /* pairs (0,1) and (2,3); layer 4 whole */
    {"fc.0.w", 1}, {"fc.0.b", 1}, {"fc.1.w", 2}, {"fc.2.w", 1}, {"fc.2.b", 1}, {"fc.3.w", 2},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

MT_TEST(default_rows_give_megatrons_layouts) {
    const mt_gpt_config gpt = {.L = 2, .C = 32, .NH = 4, .maxT = 8, .V = 256, .Vp = 256};
    mt_llama_config llama = mt__llama_defaults;
    llama.n_layers = 2;
    llama.dim = 32;
    llama.n_heads = 4;
    llama.n_kv_heads = 2;
    llama.vocab = 256;
    llama.max_seq = 8;
    llama.tie_embeddings = false;
    const mt_mlp_config mlp5 = {.hidden = 16, .layers = 5};
    for (int k = 0; k < 2; k++) {
        const char *mesh = k ? "data=2,tensor=2" : "tensor=2";
        int n = k ? 4 : 2;
        check_model(mesh, n, MT_MODEL_GPT, &gpt, sizeof gpt, GPT_WANT, N_OF(GPT_WANT), "gpt");
        check_model(mesh, n, MT_MODEL_LLAMA, &llama, sizeof llama, LLAMA_WANT, N_OF(LLAMA_WANT),
                    "llama kv 2");
        mt_llama_config mqa = llama;
        mqa.n_kv_heads = 1;
        check_model(mesh, n, MT_MODEL_LLAMA, &mqa, sizeof mqa, LLAMA_MQA_WANT,
                    N_OF(LLAMA_MQA_WANT), "llama kv 1");
        check_model(mesh, n, MT_MODEL_MLP, &mlp5, sizeof mlp5, MLP5_WANT, N_OF(MLP5_WANT),
                    "mlp L=5");
        const mt_mlp_config odd = {.hidden = 15, .layers = 3};   /* 15: no pair splits */
        check_model(mesh, n, MT_MODEL_MLP, &odd, sizeof odd, NULL, 0, "mlp hidden 15");
    }
}

MT_TEST(a_users_rule_replaces_its_axis_only) {
    mt_train_config c = mt_train_defaults();
    mt_rules r;
    MT_CHECK_OK(mt__train_rules(&c, &r, NULL, 0));
    MT_CHECK(!strcmp(mt_rules_find(&r, "heads"), "tensor") &&
             !strcmp(mt_rules_find(&r, "batch"), "data+fsdp+expert") &&
             !mt_rules_find(&r, "embed"), "the default rows");
    c.rules = "heads=,embed=fsdp";
    MT_CHECK_OK(mt__train_rules(&c, &r, NULL, 0));
    MT_CHECK(!strcmp(mt_rules_find(&r, "heads"), "") && !strcmp(mt_rules_find(&r, "embed"), "fsdp")
             && !strcmp(mt_rules_find(&r, "mlp"), "tensor") &&
             !strcmp(mt_rules_find(&r, "batch"), "data+fsdp+expert"),
             "heads whole and embed over fsdp, the rest the rows'");
    /* the GPT with embed over fsdp: its layernorm weights stored split */
    const mt_gpt_config gpt = {.L = 1, .C = 32, .NH = 4, .maxT = 8, .V = 256, .Vp = 256};
    c.model = MT_MODEL_GPT;
    c.model_config = &gpt;
    c.model_config_size = sizeof gpt;
    c.B = 4;
    c.T = 8;
    c.mesh = "fsdp=2,tensor=2";
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, 4, &mesh));
    const mt__train_model *m = mt__train_model_of(MT_MODEL_GPT);
    mt_graph *g = mt_graph_create();
    MT_CHECK(m->build(&c, g, 1.0f), "build: %s", mt_graph_errmsg(g));
    mt_partition_opts opts;
    MT_CHECK_OK(mt__shard_program(m, &c, g, mesh, &opts));
    mt_sharding ln = mt_tensor_sharding(mt_graph_find(g, "h.0.ln_1.w"));
    mt_sharding q = mt_tensor_sharding(mt_graph_find(g, "h.0.attn.qkv.w"));
    MT_CHECK(ln.dim_axes[0] == 1u && q.dim_axes[1] == 0 && q.dim_axes[2] == 1u &&
             opts.gather_axes == 1u, "ln_1.w over fsdp (0x%x), qkv's heads whole (0x%x) and "
             "its embed over fsdp (0x%x), gathered over fsdp (0x%x)", ln.dim_axes[0],
             q.dim_axes[1], q.dim_axes[2], opts.gather_axes);
    mt_graph_free(g);
    mt_mesh_free(mesh);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
