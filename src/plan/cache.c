/*
 * cache.c — the planner's programs, built once: a chunk's program as one
 * device of its stage runs it (program.c), with its seconds on the
 * request's hardware (step.h), kept by everything it depends on
 * (mt__plan_prog_key) in an open-addressing table, so that one build serves
 * every layout that shares it.
 */
#include "plan/cost.h"
#include "plan/host.h"
#include "plan/search_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char NO_DATA[] = "(plan reads no data)";

void mt__plan_model_config(const mt_plan_request *r, mt_train_config *c) {
    *c = mt_train_defaults();
    c->model = r->model.model;
    c->model_config = r->model.model_config;
    c->model_config_size = mt_model_about_of(r->model.model)->config_size;
    if (mt_model_about_of(r->model.model)->dataset) c->data = NO_DATA;
    c->T = r->seq;
    c->doc_mask = r->model.doc_mask;   /* the document ids' inputs and moves */
}

static bool same_key(const mt__plan_prog_key *a, const mt__plan_prog_key *b) {
    return !memcmp(a, b, sizeof *a);
}

static uint64_t key_hash(const mt__plan_prog_key *k) {
    uint64_t h = 1469598103934665603u;   /* FNV-1a */
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211u;
    return h;
}

/* The slot of key: where it is, or the empty one where it goes. */
static size_t slot_of(const mt__plan_search *s, const mt__plan_prog_key *key) {
    size_t i = (size_t)key_hash(key) & (s->n_slots - 1);
    while (s->slots[i] && !same_key(&s->cache[s->slots[i] - 1]->key, key))
        i = (i + 1) & (s->n_slots - 1);
    return i;
}

/* Room for one more entry: the array and the slots, grown (rehashed) by
 * doubling. */
static mt_status grow(mt__plan_search *s) {
    if (s->n_cache == s->cap_cache) {
        size_t c = s->cap_cache ? 2 * s->cap_cache : 64;
        mt__plan_cached **g = realloc(s->cache, c * sizeof *g);
        if (!g) return mt_fail(MT_ENOMEM, "out of memory for %zu cached programs", c);
        s->cache = g;
        s->cap_cache = c;
    }
    if (2 * (s->n_cache + 1) <= s->n_slots) return MT_OK;
    size_t n = s->n_slots ? 2 * s->n_slots : 256;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return mt_fail(MT_ENOMEM, "out of memory for %zu cache slots", n);
    free(s->slots);
    s->slots = slots;
    s->n_slots = n;
    for (size_t i = 0; i < s->n_cache; i++) s->slots[slot_of(s, &s->cache[i]->key)] = i + 1;
    return MT_OK;
}

/* The request's rules as the layout of `key` runs them, into buf (cap
 * bytes): each rule's mesh axes less those of size 1 in the layout, which
 * its mesh leaves out (mt__plan_mesh_text) and which split nothing
 * (mt_rules_sharding takes only axes a mesh has with size > 1), so that a
 * rule such as embed=fsdp holds on every layout, fsdp=1 included. NULL
 * without rules; the text as given when it does not parse (start() has
 * refused it: mt_train_config_check says why). */
static const char *layout_rules(const char *rules, const mt__plan_prog_key *key, char *buf,
                                size_t cap) {
    mt_rules r;
    if (!rules || !*rules || mt_rules_parse(rules, &r) != MT_OK) return rules;
    static const char *const AXIS[5] = {"data", "fsdp", "tensor", "pipe", "expert"};
    const int size[5] = {key->d, key->f, key->t, key->p, key->e};
    for (int k = 0; k < r.n; k++) {
        char kept[sizeof r.rule[k].mesh] = "";
        size_t at = 0;
        for (const char *p = r.rule[k].mesh; *p;) {
            size_t len = strcspn(p, "+");
            int a = 0;
            while (a < 5 && !(strlen(AXIS[a]) == len && !strncmp(p, AXIS[a], len))) a++;
            if (a == 5 || size[a] > 1)   /* an axis unknown here: the check's to refuse */
                at += (size_t)snprintf(kept + at, sizeof kept - at, "%s%.*s", at ? "+" : "",
                                       (int)len, p);
            p += len + (p[len] == '+');
        }
        memcpy(r.rule[k].mesh, kept, sizeof kept);
    }
    mt_rules_format(&r, buf, cap);
    return buf;
}

/* The key under which the program of `key` is kept for the layouts that
 * share it, into *shared; false where it is its layout's own. Layouts of
 * one tensor axis run one program, node for node (test_plan_share.c checks
 * each class against direct builds), when they are of one class:
 *   1. ZeRO (zero >= 1) on a mesh with both data and fsdp, of one d·f: the
 *      states are split 1/(d·f), the collectives run over both axes
 *      together and the batch is d·f·b, whatever the split;
 *   2. ZeRO-3 over data alone (d = D, f = 1) and fsdp alone without ZeRO
 *      (d = 1, f = D): both split the parameters over the one axis of D
 *      devices, in the same place of the mesh;
 *   3. ZeRO-2 and ZeRO-1 over data alone (f = 1), of one d: meshtrain's
 *      ZeRO-1 already reduce-scatters the gradients and gathers the
 *      parameters (the two differ in the memory conventions' counts);
 *   4. no ZeRO with a data axis, of one f: the data axis only reduces the
 *      gradients, whatever its size;
 * and, in any class, a pipeline's chunk of as many blocks in the same role
 * (the first, a middle one, the last) whatever the stages: the pipe axis
 * places the chunks and carries the messages between them, which the step
 * costs apart (evaluate.c). Only the timing is each layout's own mesh's
 * (borrow). Not under --rules: a rule may name data or fsdp alone. The
 * shared key is the layout's with d the class's size, f = -(its class),
 * which no layout has, the class's zero stage, and a pipeline's p = 2 with
 * the chunk its role's of 2 stages x 2. */
static bool shared_key(const mt__plan_search *s, const mt__plan_prog_key *key,
                       mt__plan_prog_key *shared) {
    const char *rules = s->req->model.rules;
    if (rules && *rules) return false;
    /* a context axis joins the replicas' reductions and stores (data x
       context): the classes below are not checked for it, each its own */
    if (key->c > 1) return false;
    /* nor are they for an expert axis (its own rules and exchanges) */
    if (key->e > 1) return false;
    int cls, zero = key->zero, size = key->d * key->f;
    if (key->zero >= 1 && key->d > 1 && key->f > 1) cls = 1;
    else if ((key->zero == 3 && key->d > 1 && key->f == 1) ||
             (key->zero == 0 && key->d == 1 && key->f > 1))
        cls = 2, zero = 0;
    else if ((key->zero == 1 || key->zero == 2) && key->d > 1 && key->f == 1)
        cls = 3, zero = 1;
    else if (key->zero == 0 && key->d > 1)
        cls = 4, size = key->f;
    else if (key->p > 1)
        cls = 5;   /* its own mesh's, shared over the stages only */
    else
        return false;
    *shared = *key;
    shared->d = size;
    shared->f = -cls;
    shared->zero = zero;
    if (key->p > 1) {   /* mt__plan_program_cached's roles at v = 2 */
        const int last = 2 * key->p - 1;
        shared->chunk = key->chunk == 0 ? 0 : key->chunk == last ? 3 : 1;
        shared->p = 2;
    }
    return true;
}

/* The entry of `key` in the cache, or NULL. */
static mt__plan_cached *find(const mt__plan_search *s, const mt__plan_prog_key *key) {
    if (!s->n_slots) return NULL;
    size_t at = slot_of(s, key);
    return s->slots[at] ? s->cache[s->slots[at] - 1] : NULL;
}

/* The bytes entry e holds: itself, and unless borrowed its nodes, unpacked
 * and packed (cache_pack.c keeps both once unpacked). */
static size_t entry_bytes(const mt__plan_cached *e) {
    if (e->borrowed) return sizeof *e;
    return sizeof *e + (e->prog.nodes ? (size_t)e->prog.n_nodes * sizeof *e->prog.nodes : 0) +
           mt__plan_cache_packed_bytes(e);
}

/* e (with key and prog) in the cache; e->prog.nodes are e's to free
 * unless e->borrowed. */
static mt_status add(mt__plan_search *s, mt__plan_cached *e) {
    mt_status st = grow(s);
    if (st != MT_OK) return st;
    s->cache_bytes += entry_bytes(e);
    s->cache[s->n_cache++] = e;
    s->slots[slot_of(s, &e->key)] = s->n_cache;
    return MT_OK;
}

/* The mesh text of `key`'s layout into spec (cap bytes), and its devices. */
static int key_mesh(const mt__plan_prog_key *key, char *spec, size_t cap) {
    mt_plan_layout l = {.data = key->d, .fsdp = key->f, .tensor = key->t, .pipe = key->p,
                        .context = key->c, .expert = key->e};
    mt__plan_mesh_text(&l, spec, cap);
    return mt__plan_layout_devices(&l);
}

/* e->prog's seconds on the layout of e->key (its mesh, the request's
 * hardware and buckets), into e->ct and e->keys. */
static mt_status time_entry(const mt__plan_search *s, const mt_mesh *mesh, int devices,
                            mt__plan_cached *e) {
    const mt_plan_request *r = s->req;
    mt_train_config bc = {.grad_reduce = r->precision, .bucket_mb = r->model.bucket_mb};
    mt_hardware host_share;
    return mt__plan_chunk_time_of(mt__plan_layout_hw(s, devices, &host_share), mesh,
                                  r->precision, &e->prog, mt__plan_bucket_bytes(&bc), &e->keys,
                                  &e->ct);
}

/* Whether the mesh of `devices` devices lays out on the request's system as
 * the timing lays it (time_entry: mt__plan_chunk_time_of's first step,
 * whatever the program); where not, the error is the timing's, with its
 * message. */
static mt_status mesh_lays_out(const mt__plan_search *s, const mt_mesh *mesh, int devices) {
    mt_hardware host_share;
    mt__plan_map map;
    return mt__plan_map_make(mt__plan_layout_hw(s, devices, &host_share), mesh, &map);
}

/* Builds the program of e->key into e (its status and why too). With
 * `skip_unlaid`, a program whose mesh the system cannot lay out is left
 * unbuilt once the trainer's checks pass (e->unbuilt): its timing would
 * refuse it with the mesh's words whatever its nodes, and such builds were
 * 29 to 46 % of the published searches' (issue 40's speed item). Fails
 * only for MT_ENOMEM. */
static mt_status build(mt__plan_search *s, mt__plan_cached *e, bool skip_unlaid) {
    const mt__plan_prog_key *key = &e->key;
    const mt_plan_request *r = s->req;
    const mt_model_about *about = mt_model_about_of(r->model.model);
    /* the model at key->blocks blocks a chunk */
    void *mc = malloc(about->config_size ? about->config_size : 1);
    if (!mc) return mt_fail(MT_ENOMEM, "out of memory for a model's settings");
    memcpy(mc, r->model.model_config, about->config_size);
    int S = key->p * key->v;
    mt_status rs = mt_model_resize(&r->model, mc, key->blocks * S, s->seq);
    if (rs != MT_OK) {
        free(mc);
        return rs;
    }
    mt_train_config c;
    mt__plan_model_config(r, &c);
    c.model_config = mc;
    c.B = key->batch * key->d * key->f * (key->e > 1 ? key->e : 1);
    /* a pipeline's m; else 2, so that the gradients ZeRO-2 and fsdp once keep
       over several microbatches are built (evaluate.c drops them for one) */
    c.accum = key->p > 1 ? key->p : 2;
    c.zero = key->zero;
    /* the request's choice of FSDP's backward gather, where the layout
     * stores parameters split (elsewhere the trainer refuses it) */
    const bool fsdp_like = (key->f > 1 || key->zero == 3) && key->zero != 1 && key->zero != 2;
    c.fsdp_gather = fsdp_like ? r->model.fsdp_gather : 0;
    c.reshard_after_forward = fsdp_like && c.fsdp_gather <= 0 ? r->model.reshard_after_forward : 0;
    c.remat = (mt_remat)key->remat;
    c.sequence_parallel = key->sp;
    c.collective_matmul = key->sp ? (key->cm ? 1 : -1) : 0;
    c.cp_attention = key->c > 1 ? key->cpa : 0;
    c.precision = r->precision;
    char rules[MT_RULES_MAX * (MT_LOGICAL_NAME + 66)];
    c.rules = layout_rules(r->model.rules, key, rules, sizeof rules);
    c.bucket_mb = r->model.bucket_mb;   /* the trainer's buckets: 25 MiB by default */
    c.schedule = key->p <= 1 ? NULL
                 : mt_schedule_kind_name(key->v > 1 ? MT_SCHEDULE_INTERLEAVED : MT_SCHEDULE_1F1B);
    c.pipe_chunks = key->p > 1 ? key->v : 0;
    char spec[96];
    c.mesh = spec;
    c.devices = key_mesh(key, spec, sizeof spec);
    c.grad_reduce = r->precision;   /* bf16 plans reduce in bf16, as large runs do */
    mt_mesh *mesh = NULL;
    mt_status st = mt_mesh_create(spec, c.devices, &mesh);
    /* the device of the chunk's stage: pipe coordinate the stage, the rest 0,
       asked of the trainer only where the memo does not know the stage. What
       it answers, and whether it refuses, is one for every key of p stages
       and v chunks a device in a search: the schedule that places the chunks
       (interleaved at v, or 1f1b; m = p) and the trainer's pipeline check
       (mt__train_pipe_check: the model kind, that schedule, m >= p, L =
       blocks x p x v >= p x v) read nothing else of the key, so a stage
       remembered was asked without a refusal. Each ask makes the schedule
       twice; at stage 0 for every pipeline key they were a twentieth of a
       search's time */
    int device = 0;
    if (st == MT_OK && key->p > 1) {
        int pipe_axis = 0, coords[MT_MESH_MAX_AXES] = {0};
        while (pipe_axis < mt_mesh_ndim(mesh) - 1 &&
               strcmp(mt_mesh_axis_name(mesh, pipe_axis), "pipe") != 0)
            pipe_axis++;
        const unsigned slot = ((unsigned)key->p * 131u + (unsigned)key->v * 31u +
                               (unsigned)key->chunk) % (sizeof s->stage_memo /
                                                        sizeof s->stage_memo[0]);
        mt__plan_stage_memo *memo = &s->stage_memo[slot];
        const bool known = memo->p == key->p && memo->v == key->v && memo->chunk == key->chunk;
        bool found = false;
        if (known) {
            coords[pipe_axis] = memo->stage;
            device = mt_mesh_device(mesh, coords);
            found = true;
        }
        for (int stage = 0; stage < key->p && !found && st == MT_OK; stage++) {
            coords[pipe_axis] = stage;
            int dev = mt_mesh_device(mesh, coords), ch[MT_SCHEDULE_MAX_CHUNKS], n = 0, SS = 1;
            st = mt_train_pipe_chunks(&c, mesh, dev, ch, MT_SCHEDULE_MAX_CHUNKS, &n, &SS);
            for (int i = 0; i < n && !found; i++)
                if (ch[i] == key->chunk) found = true, device = dev;
            if (found && !known) {
                memo->p = key->p, memo->v = key->v, memo->chunk = key->chunk;
                memo->stage = stage;
            }
        }
    }
    if (st == MT_OK) st = mt_train_config_check(&c);
    if (st == MT_OK && skip_unlaid && (st = mesh_lays_out(s, mesh, c.devices)) != MT_OK) {
        mt_mesh_free(mesh);
        free(mc);
        e->prog_ok = e->unbuilt = true;
        e->status = st;
        if (st == MT_ENOMEM) return st;
        snprintf(e->why, sizeof e->why, "%s", mt_errmsg());
        return MT_OK;
    }
    if (st == MT_OK) st = mt__plan_program_build(&c, mesh, device, key->chunk, S, &e->prog);
    /* the mixed16 convention counts the step's traffic in 16 bits too */
    const mt__plan_step_conv conv = mt__plan_step_conv_of(r);
    if (st == MT_OK) st = mt__plan_program_pad_unsplit(&e->prog, conv.pad);
    if (st == MT_OK && conv.act_bytes < 4)
        mt__plan_program_traffic16(&e->prog, conv.grad_width, conv.unfused_attention);
    if (st == MT_OK && conv.recompute_comm && c.remat == MT_REMAT_FULL)
        st = mt__plan_program_recompute_comm(&e->prog);
    if (st == MT_OK && conv.ds_fetches) st = mt__plan_program_ds_fetches(&e->prog, c.remat == MT_REMAT_FULL);
    if (st == MT_OK && conv.list_collectives) mt__plan_program_list_collectives(&e->prog);
    /* blocks served the recomputation's copies, parameters DeepSpeed's
       fetches: cleared, every layer's nodes are alike again and a packed program keeps them once (cache_pack.c) */
    for (int i = 0; st == MT_OK && i < e->prog.n_nodes; i++)
        e->prog.nodes[i].block = e->prog.nodes[i].param = -1;
    e->prog_ok = st == MT_OK;
    if (st == MT_OK) st = time_entry(s, mesh, c.devices, e);
    mt_mesh_free(mesh);
    free(mc);
    e->status = st;
    if (st == MT_ENOMEM) return st;
    if (st != MT_OK) snprintf(e->why, sizeof e->why, "%s", mt_errmsg());
    s->n_built += st == MT_OK;
    return MT_OK;
}

/* e (key set) from the program `from` built for another layout that
 * shares it (shared_key): its summary, nodes borrowed, timed on e's own
 * mesh. Fails only for MT_ENOMEM. */
static mt_status borrow(mt__plan_search *s, const mt__plan_cached *from, mt__plan_cached *e) {
    e->prog = from->prog;
    e->borrowed = true;
    char spec[96];
    const int devices = key_mesh(&e->key, spec, sizeof spec);
    mt_mesh *mesh = NULL;
    mt_status st = mt_mesh_create(spec, devices, &mesh);
    if (st == MT_OK) st = time_entry(s, mesh, devices, e);
    mt_mesh_free(mesh);
    e->status = st;
    if (st == MT_ENOMEM) return st;
    if (st != MT_OK) snprintf(e->why, sizeof e->why, "%s", mt_errmsg());
    return MT_OK;
}

mt_status mt__plan_program_uncached(mt__plan_search *s, const mt__plan_prog_key *key,
                                    mt__plan_cached *e) {
    memset(e, 0, sizeof *e);
    e->key = *key;
    return build(s, e, false);
}

/* Builds (or finds) the program of `key`. */
mt_status mt__plan_program_cached(mt__plan_search *s, const mt__plan_prog_key *asked,
                                  const mt__plan_cached **out) {
    /* a chunk runs the program of the chunk of as many blocks in the same
       role under v = 2 (interleaved), whatever the chunks a device: the
       first (the embedding), a middle one, the last (the head and the
       loss); its blocks make it, not how many chunks the model is cut
       into, nor the schedule that orders and places them. One build serves
       every depth */
    mt__plan_prog_key key = *asked;
    const int last = asked->p * asked->v - 1;
    if (asked->p > 1 && asked->v != 2 &&
        (asked->chunk == 0 || asked->chunk == 1 || asked->chunk == last)) {
        key.chunk = asked->chunk == last ? 2 * asked->p - 1 : asked->chunk;
        key.v = 2;
    }
    mt__plan_cached *e = find(s, &key);
    if (e) {
        *out = e;
        return MT_OK;
    }
    mt__plan_prog_key skey;
    const bool shares = shared_key(s, &key, &skey);
    mt__plan_cached *from = shares ? find(s, &skey) : NULL;
    if (from) {
        from->used = ++s->clock;
        if (!from->prog.nodes) {   /* kept packed past a trim: unpacked for its borrowers */
            const size_t packed = sizeof *from + mt__plan_cache_packed_bytes(from);
            mt_status us = mt__plan_cache_unpack(from);
            if (us != MT_OK) return us;
            s->packed_bytes -= packed;
            s->cache_bytes += entry_bytes(from);
        }
    }
    e = calloc(1, sizeof *e);
    if (!e) return mt_fail(MT_ENOMEM, "out of memory for a cached program");
    e->key = key;
    mt_status st = from ? borrow(s, from, e) : build(s, e, true);
    if (st != MT_OK) {   /* MT_ENOMEM: what was made, freed */
        if (!e->borrowed) mt__plan_program_free(&e->prog);
        free(e);
        return st;
    }
    /* the first build of a shared program: kept under the shared key too,
       which owns its nodes (a refused build is not shared: its reason may
       name its mesh; nor one left unbuilt on a mesh the hardware cannot lay
       out, which has no nodes to lend) */
    if (shares && !from && e->prog_ok && !e->unbuilt) {
        mt__plan_cached *owner = malloc(sizeof *owner);
        if (owner) {
            *owner = *e;
            owner->key = skey;
            owner->used = ++s->clock;
            st = add(s, owner);
        }
        if (!owner || st != MT_OK) {
            free(owner);
            mt__plan_program_free(&e->prog);
            free(e);
            return owner ? st : mt_fail(MT_ENOMEM, "out of memory for a cached program");
        }
        e->borrowed = true;
    }
    if ((st = add(s, e)) != MT_OK) {
        if (!e->borrowed) mt__plan_program_free(&e->prog);
        free(e);
        return st;
    }
    *out = e;
    return MT_OK;
}

/* Frees entry e (its nodes unless borrowed). */
static void drop(mt__plan_cached *e) {
    if (!e->borrowed) mt__plan_program_free(&e->prog);
    free(e->packed_nodes);
    free(e->packed_order);
    free(e->packed_live);
    free(e);
}

/* Newest first. */
static int by_use(const void *a, const void *b) {
    const mt__plan_cached *x = *(mt__plan_cached *const *)a, *y = *(mt__plan_cached *const *)b;
    return (x->used < y->used) - (x->used > y->used);
}

void mt__plan_cache_trim(mt__plan_search *s) {
    /* the search's threads each hold their own cache: the budgets are split */
    const size_t share = s->n_workers > 1 ? (size_t)s->n_workers : 1;
    const size_t budget = MT__PLAN_CACHE_BUDGET / share, pack_budget = MT__PLAN_PACK_BUDGET / share;
    if (s->cache_bytes <= budget) return;
    /* every entry but the pinned ones and the shared programs (shared_key)
       last used, up to half the budget, which the layouts laid out next
       may borrow, and the ones used before them packed, up to
       MT__PLAN_PACK_BUDGET (cache_pack.c); the borrowers go (none outlives
       its owner) */
    size_t kept = s->n_pinned;
    for (size_t i = s->n_pinned; i < s->n_cache; i++) {
        mt__plan_cached *e = s->cache[i];
        if (e->key.f < 0 && !e->borrowed) s->cache[kept++] = e;
        else drop(e);
    }
    qsort(s->cache + s->n_pinned, kept - s->n_pinned, sizeof *s->cache, by_use);
    s->cache_bytes = s->packed_bytes = 0;
    s->n_cache = s->n_pinned;
    for (size_t i = s->n_pinned; i < kept; i++) {
        mt__plan_cached *e = s->cache[i];
        if (e->prog.nodes) {
            const size_t bytes = entry_bytes(e);
            if (s->cache_bytes + bytes <= budget / 2) {
                s->cache[s->n_cache++] = e;
                s->cache_bytes += bytes;
                continue;
            }
            if (mt__plan_cache_pack(e) != MT_OK) {   /* no room to pack: built again if asked */
                drop(e);
                continue;
            }
        }
        const size_t packed = sizeof *e + mt__plan_cache_packed_bytes(e);
        if (s->packed_bytes + packed <= pack_budget) {
            s->cache[s->n_cache++] = e;
            s->packed_bytes += packed;
        } else {
            drop(e);
        }
    }
    /* the times remembered by the addresses of entries now freed */
    if (s->time_memo) memset(s->time_memo, 0, MT__PLAN_TIME_MEMO * sizeof *s->time_memo);
    /* the kept entries' slots, laid again (the freed ones' are gone) */
    if (s->n_slots) {
        memset(s->slots, 0, s->n_slots * sizeof *s->slots);
        for (size_t i = 0; i < s->n_cache; i++) s->slots[slot_of(s, &s->cache[i]->key)] = i + 1;
    }
}

void mt__plan_cache_free(mt__plan_search *s) {
    for (size_t i = 0; i < s->n_cache; i++) drop(s->cache[i]);
    free(s->cache);
    free(s->time_memo);
    mt__plan_pipeline_slots_free(s);
    s->time_memo = NULL;
    free(s->slots);
    s->cache = NULL;
    s->slots = NULL;
    s->n_cache = s->cap_cache = s->n_slots = s->n_pinned = s->cache_bytes = 0;
    s->packed_bytes = 0;
}


const mt_hardware *mt__plan_layout_hw(const mt__plan_search *s, int chips, mt_hardware *tmp) {
    const mt_hardware *hw = s->req->hw;
    if (hw->n_levels < 1 || hw->levels[0].kind != MT_LINK_THREADS) return hw;
    /* the trainer's default: every core, shared out (threads 0) */
    return mt__plan_host_devices(hw, chips, 0, tmp) == MT_OK ? tmp : hw;
}
