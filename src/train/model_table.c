/*
 * model_table.c — the one table of the models `meshtrain train` can train,
 * reached by kind and by name: the runtime's model registry
 * (base/registry.c). The library's own models (each an mt__train_model
 * entry in a file of train/models/, its builder in a folder of src/models/)
 * are registered first, on the first lookup, in the order of their stable
 * public kinds (train.h's MT_MODEL_*); a model registered from outside
 * (mt__train_model_register) goes through the same checks and takes the
 * next kind. Also the public calls on a kind's settings (train.h).
 */
#include "train/train_impl.h"
#include "base/base_impl.h"   /* the registries */

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The library's models, at their stable kinds. */
static const mt__train_model *const BUILTIN[] = {
    [MT_MODEL_GPT] = &mt__model_gpt,
    [MT_MODEL_MLP] = &mt__model_mlp,
    [MT_MODEL_LINREG] = &mt__model_linreg,
    [MT_MODEL_LLAMA] = &mt__model_llama,
};
#define N_BUILTIN ((int)(sizeof BUILTIN / sizeof BUILTIN[0]))
static_assert(sizeof(mt_gpt_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");
static_assert(sizeof(mt_mlp_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");
static_assert(sizeof(mt_llama_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");

/* The entry checks and adds m to the registry as *kind: what both the
 * library's models and those registered from outside go through. */
static mt_status add_model(const mt__train_model *m, mt_model_kind *kind) {
    if (!m->about.name || !m->build || !m->fill_batch || !m->describe || !m->input || !m->target)
        return mt_fail(MT_EINVAL, "registering model '%s': an entry needs about.name, build, "
                       "fill_batch, describe, input and target (train_impl.h documents each)",
                       m->about.name ? m->about.name : "(no name)");
    if (m->about.config_size > sizeof(mt__model_config_buf) ||
        (m->about.config_size && !m->config_defaults))
        return mt_fail(MT_EINVAL, "registering model '%s': its settings (%zu bytes) need "
                       "config_defaults and at most %zu bytes", m->about.name,
                       m->about.config_size, sizeof(mt__model_config_buf));
    const int n = mt__registry_count(MT__REGISTRY_MODELS);
    for (int k = 0; k < n; k++) {
        const mt__train_model *o = mt__registry_get(MT__REGISTRY_MODELS, k);
        if (o && !strcmp(o->about.name, m->about.name))
            return mt_fail(MT_EINVAL, "registering model '%s': a model of that name exists "
                           "(kind %d); pick another name", m->about.name, k);
    }
    int at = mt__registry_add(MT__REGISTRY_MODELS, m);
    if (at < 0)
        return mt_fail(MT_ENOMEM, "registering model '%s': the registry holds %d models "
                       "already", m->about.name, MT__REGISTRY_MAX);
    *kind = (mt_model_kind)at;
    return MT_OK;
}

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
static int builtin_added;   /* the library's models registered at their kinds */

/* Registers the library's models, each at its stable kind (the registry is
 * empty before: every lookup and registration comes through here first). */
static void add_builtin(void) {
    for (int k = 0; k < N_BUILTIN; k++) {
        mt_model_kind kind;
        if (add_model(BUILTIN[k], &kind) != MT_OK || (int)kind != k) return;
        builtin_added = k + 1;
    }
}

/* The registry with the library's models in it; false (a message set) in
 * the case that cannot happen, one of them refused or not at its kind. */
static bool with_builtin(void) {
    pthread_once(&builtin_once, add_builtin);
    if (builtin_added == N_BUILTIN) return true;
    mt_fail(MT_EINVAL, "the library's model '%s' was not registered at kind %d: a broken "
            "build of meshtrain; report it", BUILTIN[builtin_added]->about.name, builtin_added);
    return false;
}

int mt__train_model_count(void) {
    return with_builtin() ? mt__registry_count(MT__REGISTRY_MODELS) : 0;
}

const mt__train_model *mt__train_model_of(mt_model_kind kind) {
    if (!with_builtin()) return NULL;
    return mt__registry_get(MT__REGISTRY_MODELS, (int)kind);
}

mt_status mt__train_model_register(const mt__train_model *m, mt_model_kind *kind) {
    if (!m || !kind) return mt_fail(MT_EINVAL, "mt__train_model_register: an argument is NULL");
    if (!with_builtin()) return MT_EINVAL;
    return add_model(m, kind);
}

mt_status mt_model_find(const char *name, mt_model_kind *kind) {
    if (!name || !kind) return mt_fail(MT_EINVAL, "mt_model_find: an argument is NULL");
    const int n = mt__train_model_count();
    for (int k = 0; k < n; k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (m && !strcmp(m->about.name, name)) {
            *kind = (mt_model_kind)k;
            return MT_OK;
        }
    }
    char names[256];
    size_t at = 0;
    names[0] = '\0';
    for (int k = 0; k < n && at < sizeof names; k++) {
        int w = snprintf(names + at, sizeof names - at, "%s%s", k ? ", " : "",
                         mt_model_name((mt_model_kind)k));
        if (w < 0) break;
        at += (size_t)w;
    }
    return mt_fail(MT_EINVAL, "no model is named '%s'; the models are %s", name, names);
}

static mt_status shaped(const mt_train_config *c, const mt__train_model **m) {
    *m = c ? mt__train_model_of(c->model) : NULL;
    if (!*m) return mt_fail(MT_EINVAL, "model kind %d is not a model", c ? (int)c->model : -1);
    if (!(*m)->shape || !(*m)->resize)
        return mt_fail(MT_EUNSUPPORTED, "--model %s is not a transformer: it has no layers, "
                       "heads or context to plan", (*m)->about.name);
    return MT_OK;
}

mt_status mt_model_shape_of(const mt_train_config *c, mt_model_shape *out) {
    const mt__train_model *m;
    mt_status s = shaped(c, &m);
    if (s != MT_OK) return s;
    *out = (mt_model_shape){0};
    m->shape(c, out);
    return MT_OK;
}

mt_status mt_model_resize(const mt_train_config *c, void *config, int layers, int max_seq) {
    const mt__train_model *m;
    mt_status s = shaped(c, &m);
    if (s == MT_OK) m->resize(config, layers, max_seq);
    return s;
}

mt_status mt_model_flops_per_token(const mt_train_config *c, double *out) {
    const mt__train_model *m = c ? mt__train_model_of(c->model) : NULL;
    *out = 0;
    if (!m) return mt_fail(MT_EINVAL, "model kind %d is not a model", c ? (int)c->model : -1);
    if (!m->step_flops)
        return mt_fail(MT_EUNSUPPORTED, "--model %s counts no FLOPs a token of its own (its "
                       "entry has no step_flops): the graph's FLOPs stand in", m->about.name);
    *out = m->step_flops(c, 1);
    return MT_OK;
}

const mt_model_about *mt_model_about_of(mt_model_kind kind) {
    const mt__train_model *m = mt__train_model_of(kind);
    return m ? &m->about : NULL;
}

const char *mt_model_name(mt_model_kind kind) {
    const mt__train_model *m = mt__train_model_of(kind);
    return m ? m->about.name : NULL;
}

/* ======================================================================== */
/* The models' settings (train.h)                                            */
/* ======================================================================== */

void mt__train_model_config_copy(const mt__train_model *m, const mt_train_config *c,
                                 mt__model_config_buf *dst) {
    memset(dst, 0, sizeof *dst);
    const void *src = c->model_config ? c->model_config : m->config_defaults;
    if (m->about.config_size) memcpy(dst->bytes, src, m->about.config_size);
}

/* The entry of `kind` for a buffer of `size` bytes meant for its settings
 * (`fn` names the caller in messages); NULL after the message. */
static const mt__train_model *entry_for(const char *fn, mt_model_kind kind, const void *cfg,
                                        size_t size) {
    const mt__train_model *m = mt__train_model_of(kind);
    if (!m) {
        mt_fail(MT_EINVAL, "%s: unknown model kind %d", fn, (int)kind);
        return NULL;
    }
    if (size != m->about.config_size || (size && !cfg)) {
        mt_fail(MT_EINVAL, "%s: --model %s's settings are %s, %zu bytes, but %zu bytes were "
                "given%s; pass a buffer of mt_model_about's config_size", fn, m->about.name,
                m->about.config_type ? m->about.config_type : "nothing", m->about.config_size,
                size, size && !cfg ? " at NULL" : "");
        return NULL;
    }
    return m;
}

mt_status mt_model_config_defaults(mt_model_kind kind, void *cfg, size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_defaults", kind, cfg, size);
    if (!m) return MT_EINVAL;
    if (size) memcpy(cfg, m->config_defaults, size);
    return MT_OK;
}

mt_status mt_model_config_without_data(mt_model_kind kind, const mt_train_config *c, void *cfg,
                                       size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_without_data", kind, cfg, size);
    if (!m) return MT_EINVAL;
    if (size) memcpy(cfg, m->config_defaults, size);
    if (m->without_data) m->without_data(c, cfg);
    return MT_OK;
}

const char *mt__train_llmc_models(char *buf, size_t n) {
    const int models = mt__train_model_count();
    int count = 0, seen = 0;
    for (int i = 0; i < models; i++) count += mt__train_model_of((mt_model_kind)i)->about.llmc;
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < models && at < n; i++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)i);
        if (!m->about.llmc) continue;
        const char *sep = seen == 0 ? "" : seen == count - 1 ? " or " : ", ";
        int w = snprintf(buf + at, n - at, "%s%s", sep, m->about.name);
        if (w < 0) break;
        at += (size_t)w;
        seen++;
    }
    return buf;
}

mt_status mt_model_config_from_llmc(mt_model_kind kind, const char *path, void *cfg, size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_from_llmc", kind, cfg, size);
    if (!m) return MT_EINVAL;
    char names[128];
    if (!m->about.llmc)
        return mt_fail(MT_EINVAL, "llm.c-family checkpoints (%s) hold %s models, not --model %s",
                       path, mt__train_llmc_models(names, sizeof names), m->about.name);
    return m->llmc_read(path, cfg);
}
