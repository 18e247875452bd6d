/*
 * mpi_comms.c — the MPI communicator of every group (and the freeing of
 * every communicator of a launch).
 *
 * At launch, for every set of mesh axes (of size > 1) one MPI_Comm_split of
 * the world makes the communicators of its groups (color: the device with
 * those coordinates zeroed, i.e. the other coordinates; key: the device id,
 * so ranks are in mesh order). All ranks are inside mt_launch then, so these
 * blocking splits cannot hang. A group over axes given out of mesh order
 * ("tensor,data") ranks its members differently: on first use it is split
 * once more from its set's communicator (key = group rank), behind an
 * MPI_Ibarrier that is waited on with the timeout, so a member that never
 * comes cannot hang the others. Both kinds are cached per axes key.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <stdlib.h>

/* The axes (bit set) over which the group's members differ. */
static uint32_t group_set(const mt_mpi *m, const mt_group *g) {
    const mt_mesh *mesh = m->ls->mesh;
    int nd = mt_mesh_ndim(mesh), c0[MT_MESH_MAX_AXES], c[MT_MESH_MAX_AXES];
    mt_mesh_coords(mesh, g->members[0], c0);
    uint32_t set = 0;
    for (int i = 1; i < g->size; i++) {
        mt_mesh_coords(mesh, g->members[i], c);
        for (int a = 0; a < nd; a++)
            if (c[a] != c0[a]) set |= 1u << a;
    }
    return set;
}

mt_status mt__mpi_group_comm(mt_mpi *m, const mt_group *g, MPI_Comm *out) {
    for (int i = 0; i < m->n_comms; i++)
        if (m->comms[i].key == g->key) {
            *out = m->comms[i].comm;
            return MT_OK;
        }
    if (m->n_comms == m->cap_comms) {
        int cap = m->cap_comms ? 2 * m->cap_comms : 16;
        comm_entry *p = realloc(m->comms, (size_t)cap * sizeof *p);
        if (!p) return mt_fail(MT_ENOMEM, "rank %d: out of memory for %d group communicators",
                               m->rank, cap);
        m->comms = p;
        m->cap_comms = cap;
    }
    uint32_t set = group_set(m, g);
    MPI_Comm base = set < SET_COMMS ? m->set_comm[set] : MPI_COMM_NULL;
    if (base == MPI_COMM_NULL)
        return mt_fail(MT_EINTERNAL, "no communicator for the axis set 0x%x of a %d-device group",
                       set, g->size);
    bool mesh_order = true;
    for (int i = 1; i < g->size; i++)
        if (g->members[i] < g->members[i - 1]) mesh_order = false;
    comm_entry e = {.key = g->key, .comm = base, .owned = false};
    if (!mesh_order) {
        /* every member must be here before the blocking split */
        MPI_Request req;
        int rc = MPI_Ibarrier(base, &req);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Ibarrier");
        mt_status s = mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, "group set-up"));
        if (s != MT_OK) return s;
        rc = MPI_Comm_split(base, 0, g->rank, &e.comm);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Comm_split");
        e.owned = true;
    }
    int r = -1;
    MPI_Comm_rank(e.comm, &r);
    if (r != g->rank)
        return mt_fail(MT_EINTERNAL, "device %d has rank %d in its group but %d in the MPI "
                       "communicator", m->rank, g->rank, r);
    m->comms[m->n_comms++] = e;
    *out = e.comm;
    return MT_OK;
}

mt_status mt__mpi_make_set_comms(mt_mpi *m) {
    const mt_mesh *mesh = m->ls->mesh;
    const int nd = mt_mesh_ndim(mesh);
    uint32_t big = 0;   /* axes of size > 1 */
    for (int a = 0; a < nd; a++)
        if (mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a)) > 1) big |= 1u << a;
    for (int s = 0; s < SET_COMMS; s++) m->set_comm[s] = MPI_COMM_NULL;
    for (uint32_t s = 1; s < (1u << nd); s++) {
        if ((s & big) != s) continue;
        if (s == big) {
            m->set_comm[s] = m->world;
            continue;
        }
        int c[MT_MESH_MAX_AXES];
        mt_mesh_coords(mesh, m->rank, c);
        for (int a = 0; a < nd; a++)
            if (s & (1u << a)) c[a] = 0;
        int rc = MPI_Comm_split(m->world, mt_mesh_device(mesh, c), m->rank, &m->set_comm[s]);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Comm_split");
    }
    return MT_OK;
}

void mt__mpi_free_comms(mt_mpi *m) {
    for (int i = 0; i < m->n_comms; i++)
        if (m->comms[i].owned) MPI_Comm_free(&m->comms[i].comm);
    m->n_comms = 0;
    free(m->comms);
    m->comms = NULL;
    m->cap_comms = 0;
    for (int s = 0; s < SET_COMMS; s++)
        if (m->set_comm[s] != MPI_COMM_NULL && m->set_comm[s] != m->world)
            MPI_Comm_free(&m->set_comm[s]);
    if (m->ctl != MPI_COMM_NULL) MPI_Comm_free(&m->ctl);
    if (m->p2p != MPI_COMM_NULL) MPI_Comm_free(&m->p2p);
    if (m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
}

#endif /* MT_HAVE_MPI */
