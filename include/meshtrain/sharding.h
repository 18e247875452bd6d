/*
 * meshtrain/sharding.h — how a tensor is laid out over a mesh: per dimension
 * the mesh axes it is split over, and the axes over which it holds partial
 * sums. The partitioner, `meshtrain explain` and checkpoints that any mesh
 * can load all build on this type.
 */
#ifndef MESHTRAIN_SHARDING_H
#define MESHTRAIN_SHARDING_H

#include "meshtrain/mesh.h"
#include "meshtrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sharding of a tensor over a device mesh: for each dimension, the bit set of
 * mesh axes it is split over (0: whole on every device; a dim split over
 * several axes is split major-to-minor in mesh order), and the bit set of
 * axes over which the tensor holds partial sums (0: none). All zero is
 * replicated, which is what every tensor of a graph is today. */
typedef struct {
    uint32_t dim_axes[MT_MAX_DIMS];
    uint32_t partial_axes;
} mt_sharding;

/* A partition spec, as JAX's PartitionSpec: per tensor dimension the mesh
 * axes it is split over. Text form: dims separated by ',', axes of one dim
 * joined by '+', '_' for a whole dim: "data,_" or "data+fsdp,tensor". Fewer
 * entries than dims leave the rest whole; "" is replicated. Fails naming the
 * spec and the axis when an axis is unknown or used twice. */
mt_status mt_sharding_parse(const mt_mesh *mesh, const char *spec, int ndim, mt_sharding *out);

/* The local shape of a global shape under a sharding; fails naming the dim
 * whose size does not divide by the product of its axes. */
mt_status mt_sharding_local_shape(const mt_mesh *mesh, const mt_sharding *sh, int ndim,
                                  const int64_t *global, int64_t *local);

/* Writes the partition spec of the first `ndim` dims of sh as
 * mt_sharding_parse reads it ("data+fsdp,_": '_' for a whole dim) into buf
 * (cap bytes, always terminated when cap > 0). Partial sums have no spec
 * text and are left out. An axis bit the mesh does not have prints as '?'.
 * Returns the length the whole text needs, as snprintf does. */
size_t mt_sharding_format(const mt_mesh *mesh, const mt_sharding *sh, int ndim, char *buf,
                          size_t cap);

/* Writes a tensor type in the notation of JAX's sharding in types and of the
 * scaling book: the dtype, each global dim followed by '@' and its axes
 * (joined by '+', major first), then the partial-sum axes: "f32[8@data,4]",
 * "f32[8@x+y,4]", "f32[8,16]{U:x}", "f32[]" for a scalar. Same buffer rules
 * and return value as mt_sharding_format. */
size_t mt_sharding_type_format(const mt_mesh *mesh, mt_dtype dtype, int ndim,
                               const int64_t *shape, const mt_sharding *sh, char *buf,
                               size_t cap);

/* A tensor type: dtype, global shape and sharding, as a program's types are
 * written ("f32[8@x,4]", "f32[8,16]{U:x}"). */
typedef struct {
    mt_dtype    dtype;
    int         ndim;                     /* 0 (scalar) .. MT_MAX_DIMS */
    int64_t     shape[MT_MAX_DIMS];       /* global */
    mt_sharding sharding;
} mt_type;

/* Reads a type in the form mt_sharding_type_format writes: a dtype (f32,
 * bf16, i32), '[', dims separated by ',' each a size optionally followed by
 * '@' and axes joined by '+' (listed in mesh order: major first), ']', and
 * optionally "{U:axes}" with the partial-sum axes joined by '+'. Fails with
 * MT_EINVAL naming the text and what was wrong: an unknown dtype, a syntax
 * error (and where), an axis the mesh lacks (listing the mesh's), an axis
 * used twice in one type (partial-sum axes included), axes of one dim out of
 * mesh order, or a dim whose size does not divide by its axes' product
 * (naming the dim, the axes and both numbers). */
mt_status mt_type_parse(const mt_mesh *mesh, const char *text, mt_type *out);

/* mt_sharding_type_format of a type. */
size_t mt_type_format(const mt_mesh *mesh, const mt_type *t, char *buf, size_t cap);

/* The local shape of a type on every device (mt_sharding_local_shape). */
mt_status mt_type_local_shape(const mt_mesh *mesh, const mt_type *t, int64_t *local);

/* The sharding of a tensor of a graph. */
mt_sharding mt_tensor_sharding(const mt_tensor *t);

/* --- logical axes and rules (MaxText's logical_axis_rules) ---
 * A model names what each dim of a leaf is, in its own words: "vocab,embed"
 * for an embedding table, "heads,embed" for a query projection, "batch,seq"
 * for the tokens. A strategy is then a table from those logical axes to
 * mesh axes, "heads=tensor,mlp=tensor,batch=data+fsdp", and a leaf's
 * sharding is read off the two (mt_rules_sharding), whatever the model
 * and whatever the mesh. */

#define MT_LOGICAL_NAME 16   /* a logical axis name's bytes, with its terminator */
#define MT_RULES_MAX    32   /* logical axes in one table */

/* Names the logical axis of each dim of a leaf (its sharding then comes
 * from the rules) or of an op's output (its constraint, partition.h's
 * mt_tensor_set_constraint): names separated by ',',
 * one a dim from dim 0, '_' (or nothing) for a dim with none; fewer names
 * than dims leave the rest without. A name is letters, digits and '_', at
 * most MT_LOGICAL_NAME - 1 bytes, and names one dim of the tensor; a name
 * may end in "*k" when the dim is units of k elements that a split keeps
 * whole ("kv_heads*64,embed": a (KV·64, C) projection splits on whole kv
 * heads). "" takes every name away. MT_EINVAL naming the tensor and the
 * text otherwise. */
mt_status   mt_tensor_set_logical(mt_tensor *t, const char *axes);
/* The logical axis of dim `dim` ("" for none, or a dim it does not have). */
const char *mt_tensor_logical(const mt_tensor *t, int dim);

/* A table of rules: each logical axis to mesh axes ('+'-joined, in the
 * order they split the dim; "" keeps the dim whole). */
typedef struct {
    int n;
    struct {
        char logical[MT_LOGICAL_NAME];
        char mesh[64];
    } rule[MT_RULES_MAX];
} mt_rules;

/* Reads "logical=mesh[+mesh...],..." ("mlp=tensor,batch=data+fsdp,embed=");
 * "" is no rule. Mesh axes are names only here: a rule naming an axis a
 * mesh lacks does nothing on that mesh. MT_EINVAL naming the text and the
 * entry for a missing '=', a name that is not one, or a logical axis given
 * twice. */
mt_status   mt_rules_parse(const char *text, mt_rules *out);
/* Adds `over`'s rules to `base`, replacing base's rule of a logical axis
 * that `over` also has. MT_EINVAL when the table would hold more than
 * MT_RULES_MAX. */
mt_status   mt_rules_merge(mt_rules *base, const mt_rules *over);
/* The mesh axes of `logical`'s rule, or NULL when the table has none. */
const char *mt_rules_find(const mt_rules *r, const char *logical);
/* Writes the table as mt_rules_parse reads it; snprintf's return value. */
size_t      mt_rules_format(const mt_rules *r, char *buf, size_t cap);
/* The sharding the rules give t (a leaf of a global graph, with logical
 * axes) on `mesh`: each dim split over the mesh axes its logical axis's
 * rule names, taking an axis only when the mesh has it with size > 1, no
 * earlier dim of t took it (a mesh axis splits one dim of a tensor), and
 * the dim's units ("*k") divide by the product so far; otherwise that axis is
 * left out and the dim (or the rest of it) stays whole. A dim with no
 * logical axis, or one without a rule, stays whole. */
mt_status   mt_rules_sharding(const mt_rules *r, const mt_mesh *mesh, const mt_tensor *t,
                              mt_sharding *out);

/* The head-tail layout of a sequence split over `parts` devices (a
 * context-parallel split, ../shared/CONTEXT_PARALLEL.md §3): of the S rows
 * cut into 2·parts chunks of c = S/(2·parts), device `part` holds chunks
 * `part` and 2·parts−1−part, in that order, as its `local` = 2c rows.
 * Returns the position in the whole sequence of its local row i (0 <= i <
 * local); parts <= 1 returns i. local must be even when parts > 1. */
int64_t mt_headtail_pos(int64_t i, int64_t local, int parts, int part);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_SHARDING_H */
