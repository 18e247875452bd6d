/*
 * meshtrain/mesh.h — device meshes: named axes with sizes, device coordinates,
 * and the groups of devices over a set of axes.
 *
 * A mesh is a shape and names, nothing more: it moves no data (comm.h does)
 * and knows no tensors (sharding.h lays tensors out over it).
 */
#ifndef MESHTRAIN_MESH_H
#define MESHTRAIN_MESH_H

#include "meshtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_MESH_MAX_AXES 6

typedef struct mt_mesh mt_mesh;

/* Creates a mesh from a spec of named axes with sizes, e.g. "data=2,tensor=2"
 * (row-major: the last axis varies fastest over device ids). One size may be
 * -1 and is filled in from n_devices; otherwise the product must equal
 * n_devices, or the error names both. An empty spec is a 1-axis mesh "d" of
 * n_devices. Names: letters, digits, '_'; unique. */
mt_status mt_mesh_create(const char *spec, int n_devices, mt_mesh **out);
/* The number of devices a spec's sizes multiply to ("data=2,tensor=4": 8),
 * for a mesh given without a device count. MT_EINVAL, saying what to do,
 * when the spec is malformed (as mt_mesh_create), empty, leaves a size to
 * the device count (-1), or multiplies to more than 2^20 devices (a
 * product too large for an int included). */
mt_status mt_mesh_spec_devices(const char *spec, int *out);
void      mt_mesh_free(mt_mesh *mesh);
int       mt_mesh_size(const mt_mesh *mesh);
int       mt_mesh_ndim(const mt_mesh *mesh);
/* The name of axis `axis` (0-based); "?" past ndim. */
const char *mt_mesh_axis_name(const mt_mesh *mesh, int axis);
/* Size of an axis by name; 0 if there is no such axis. */
int       mt_mesh_axis_size(const mt_mesh *mesh, const char *axis);
/* "data=2,tensor=2" */
const char *mt_mesh_spec(const mt_mesh *mesh);
/* The coordinates (ndim entries) of a device, and back. */
void      mt_mesh_coords(const mt_mesh *mesh, int device, int *coords);
int       mt_mesh_device(const mt_mesh *mesh, const int *coords);

/* An ordered set of mesh axes, resolved once from names: "data", or
 * "data,tensor" for a group over both (ranks row-major in the order given,
 * as JAX's axis_index over a tuple of axes). Collectives take this. */
typedef struct {
    int     n;
    uint8_t axis[MT_MESH_MAX_AXES];
} mt_axes;

/* Resolves names; the error names an unknown axis and lists the mesh's. */
mt_status mt_mesh_axes(const mt_mesh *mesh, const char *names, mt_axes *out);
/* The bit set (bit a: axis a of the mesh, in mesh order) of the axes named
 * in `names`, for the options that take one (mt_partition_opts'
 * gather_axes, gather_allreduce_axes) and mt_sharding's
 * fields: "data,fsdp" gives (1 << data's index) | (1 << fsdp's). Names are
 * separated by ',' or '+' (as in a partition spec, "data+fsdp"), with
 * optional spaces; their order does not matter. NULL, "" or only spaces is
 * the empty set (0: the option off). MT_EINVAL, *bits 0, with a message
 * that lists the mesh's axes, for a name the mesh does not have, a name
 * given twice, an empty name (",,", a leading or trailing separator) or
 * two names without a separator; MT_EINVAL for a NULL mesh or bits. */
mt_status mt_mesh_axis_set(const mt_mesh *mesh, const char *names, uint32_t *bits);
/* Checks axes made by hand: at most ndim of them, each an axis of the mesh,
 * none twice. MT_EINVAL names the first problem. mt_mesh_axes() only makes
 * valid ones. */
mt_status mt_mesh_axes_check(const mt_mesh *mesh, mt_axes axes);
/* Devices in the group of `device` over `axes` (the devices that differ from
 * it only in those coordinates), in group-rank order; returns the count.
 * `axes` must be valid (mt_mesh_axes_check). */
int       mt_mesh_group(const mt_mesh *mesh, mt_axes axes, int device, int *members);
/* The rank of `device` in its group over `axes`, and the group size. */
int       mt_mesh_group_rank(const mt_mesh *mesh, mt_axes axes, int device);
int       mt_mesh_group_size(const mt_mesh *mesh, mt_axes axes);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_MESH_H */
