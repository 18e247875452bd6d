/*
 * mpi_comms.c — the MPI communicator of every group, and the communicators
 * kept from one launch to the next.
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
 *
 * Kept from one launch to the next. Under `meshtrain train` a launch is one
 * step, and making a launch's communicators anew each time (its dup of the
 * world, the control and point-to-point dups, the splits, the machine's
 * ranks) cost some 19 round trips between hosts a step (docs/multinode.md:
 * a tiny step at 1 ms a frame took 37.8 ms, 9.2 with them kept). So the
 * first launch makes them and each launch that ends cleanly hands them on
 * (mt__mpi_comms_keep), as process-wide state like MPI's own: such a
 * launch leaves nothing on them
 * (every collective finished, the control and point-to-point messages
 * counted and drained, and the next launch's start is a barrier, so none of
 * its messages can meet this one's), while a launch that leaves a
 * collective unfinished ends the job. The splits and group communicators
 * are for one mesh shape (its axis sizes: the colours depend on nothing
 * else) and are remade when the next launch's differs.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <stdlib.h>
#include <string.h>

/* What the last launch that ended cleanly handed on (moved into its mt_mpi
 * at the next launch's start, and back at its end). */
static struct {
    MPI_Comm    world, ctl, p2p;            /* NULL: none kept */
    int         nd, dims[MT_MESH_MAX_AXES]; /* the shape of the splits below (nd 0: none) */
    MPI_Comm    set_comm[SET_COMMS];
    comm_entry *comms;
    int         n_comms, cap_comms;
} kept = {.world = MPI_COMM_NULL, .ctl = MPI_COMM_NULL, .p2p = MPI_COMM_NULL};

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
    if (m->sets_kept) return MT_OK;
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

/* Frees the splits and group communicators (of world) in set_comm[] and
 * comms[n]; the caller forgets them. */
static void free_sets(MPI_Comm world, MPI_Comm *set_comm, comm_entry *comms, int n) {
    for (int i = 0; i < n; i++)
        if (comms[i].owned) MPI_Comm_free(&comms[i].comm);
    free(comms);
    for (int s = 0; s < SET_COMMS; s++)
        if (set_comm[s] != MPI_COMM_NULL && set_comm[s] != world) MPI_Comm_free(&set_comm[s]);
}

void mt__mpi_free_comms(mt_mpi *m) {
    free_sets(m->world, m->set_comm, m->comms, m->n_comms);
    for (int s = 0; s < SET_COMMS; s++) m->set_comm[s] = MPI_COMM_NULL;
    m->comms = NULL;
    m->n_comms = m->cap_comms = 0;
    if (m->ctl != MPI_COMM_NULL) MPI_Comm_free(&m->ctl);
    if (m->p2p != MPI_COMM_NULL) MPI_Comm_free(&m->p2p);
    if (m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
}

/* The shape the splits of `mesh` are for. */
static void shape_of(const mt_mesh *mesh, int *nd, int *dims) {
    *nd = mt_mesh_ndim(mesh);
    for (int a = 0; a < *nd; a++) dims[a] = mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
}

bool mt__mpi_comms_reuse(mt_mpi *m) {
    if (kept.world == MPI_COMM_NULL) return false;
    m->world = kept.world, m->ctl = kept.ctl, m->p2p = kept.p2p;
    kept.world = kept.ctl = kept.p2p = MPI_COMM_NULL;
    int nd, dims[MT_MESH_MAX_AXES];
    shape_of(m->ls->mesh, &nd, dims);
    const bool same = kept.nd > 0 && nd == kept.nd &&
                      memcmp(dims, kept.dims, (size_t)nd * sizeof dims[0]) == 0;
    if (same) {
        memcpy(m->set_comm, kept.set_comm, sizeof m->set_comm);
        m->comms = kept.comms, m->n_comms = kept.n_comms, m->cap_comms = kept.cap_comms;
        m->sets_kept = true;
    } else if (kept.nd > 0) {
        free_sets(m->world, kept.set_comm, kept.comms, kept.n_comms);
    }
    kept.nd = 0, kept.comms = NULL, kept.n_comms = kept.cap_comms = 0;
    return true;
}

void mt__mpi_comms_keep(mt_mpi *m) {
    mt__mpi_comms_drop_kept();
    kept.world = m->world, kept.ctl = m->ctl, kept.p2p = m->p2p;
    shape_of(m->ls->mesh, &kept.nd, kept.dims);
    memcpy(kept.set_comm, m->set_comm, sizeof kept.set_comm);
    kept.comms = m->comms, kept.n_comms = m->n_comms, kept.cap_comms = m->cap_comms;
    m->world = m->ctl = m->p2p = MPI_COMM_NULL;
    for (int s = 0; s < SET_COMMS; s++) m->set_comm[s] = MPI_COMM_NULL;
    m->comms = NULL;
    m->n_comms = m->cap_comms = 0;
}

void mt__mpi_comms_drop_kept(void) {
    if (kept.world == MPI_COMM_NULL) return;
    if (kept.nd > 0) free_sets(kept.world, kept.set_comm, kept.comms, kept.n_comms);
    MPI_Comm_free(&kept.ctl);
    MPI_Comm_free(&kept.p2p);
    MPI_Comm_free(&kept.world);
    kept.nd = 0, kept.comms = NULL, kept.n_comms = kept.cap_comms = 0;
}

#endif /* MT_HAVE_MPI */
