/*
 * mesh_impl.h — the fields behind mt_mesh, for the layers that lay tensors
 * and groups out over it (internal).
 */
#ifndef MT_MESH_IMPL_H
#define MT_MESH_IMPL_H

#include "meshtrain/mesh.h"

#define MT_MESH_MAX_NAME 32

struct mt_mesh {
    int  ndim;
    int  size;                                   /* product of sizes */
    int  sizes[MT_MESH_MAX_AXES];
    int  strides[MT_MESH_MAX_AXES];              /* row-major device-id strides */
    char names[MT_MESH_MAX_AXES][MT_MESH_MAX_NAME];
    char spec[MT_MESH_MAX_AXES * (MT_MESH_MAX_NAME + 12)];  /* canonical "data=2,tensor=2" */
};

/* The axis named by the `len` bytes at name; -1 if the mesh has none. */
int  mt__mesh_find_axis(const mt_mesh *mesh, const char *name, size_t len);
/* "'data', 'tensor'" into buf, for messages that list the mesh's axes. */
void mt__mesh_list_axes(const mt_mesh *mesh, char *buf, size_t cap);
/* The axes of a bit set (bit a: axis a), in mesh order (major first). */
static inline mt_axes mt__mesh_axes_of(uint32_t bits) {
    mt_axes ax = {0};
    for (int a = 0; a < MT_MESH_MAX_AXES; a++)
        if (bits & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax;
}

#endif /* MT_MESH_IMPL_H */
