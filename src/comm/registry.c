/*
 * registry.c — the transports built into this meshtrain, by
 * mt_transport_kind: the one place that lists them, so that mt_launch
 * (launch.c) never names a transport, and adding one is one entry here.
 * A kind this build lacks (mpi without Open MPI) has an entry too: what to
 * say to whoever asks for it.
 */
#include "comm/transport_impl.h"

#include <stddef.h>

static const struct {
    mt_transport_kind       kind;
    const mt_transport_ops *ops;       /* NULL: not built */
    const char             *missing;   /* why not, and what to do */
} transports[] = {
    {MT_TRANSPORT_THREADS, &mt__threads_transport, NULL},
#ifdef MT_HAVE_MPI
    {MT_TRANSPORT_MPI, &mt__mpi_transport, NULL},
#else
    {MT_TRANSPORT_MPI, NULL, "the mpi transport was asked for, but meshtrain was built without "
                             "Open MPI; install libopenmpi-dev and rebuild, or use the threads "
                             "transport"},
#endif
};

mt_transport_kind mt_transport_resolve(mt_transport_kind kind) {
    if (kind != MT_TRANSPORT_AUTO) return kind;
#ifdef MT_HAVE_MPI
    int size;
    mt_launcher_world(NULL, &size);
    return size > 1 ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS;
#else
    return MT_TRANSPORT_THREADS;
#endif
}

mt_status mt__transport_find(mt_transport_kind kind, const mt_transport_ops **out) {
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++) {
        if (transports[i].kind != kind) continue;
        if (!transports[i].ops) return mt_fail(MT_EUNSUPPORTED, "%s", transports[i].missing);
        *out = transports[i].ops;
        return MT_OK;
    }
    return mt_fail(MT_EINVAL, "mt_launch: unknown transport %d", (int)kind);
}
