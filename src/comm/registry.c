/*
 * registry.c — mt_launch and the transports built into this meshtrain, by
 * mt_transport_kind: the one place that lists them, so that nothing else
 * names a transport, and adding one is one entry here. A kind this build
 * lacks (mpi without Open MPI) has an entry too: what to say to whoever
 * asks for it.
 *
 * The top of comm: it names each transport's table, each table names its
 * launch, and the launches use what launch.c shares; nothing below calls
 * back up here.
 */
#include "comm/transport_impl.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

/* ======================================================================== */
/* mt_launch                                                                 */
/* ======================================================================== */

/* mt_launch resolves AUTO (mt_transport_resolve), finds the transport here
 * and calls its launch. */
mt_status mt_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
    if (!opts || !fn) return mt_fail(MT_EINVAL, "mt_launch: opts and fn must not be NULL");
    /* a bad timeout fails before any device runs (and, under MPI, before MPI
     * is started: no rank waits for another to find the same mistake) */
    double timeout_s;
    mt_status st = mt__launch_timeout(opts, &timeout_s);
    const mt_transport_ops *ops;
    if (st == MT_OK) st = mt__transport_find(mt_transport_resolve(opts->transport), &ops);
    return st != MT_OK ? st : ops->launch(opts, fn, arg);
}

mt_status mt_pmap(const char *axis, int devices, mt_device_fn fn, void *arg) {
    if (!axis || !*axis) axis = "i";
    if (strlen(axis) > 48)
        return mt_fail(MT_EINVAL, "pmap: axis name '%.20s...' is too long (48 characters at most)",
                       axis);
    char spec[64];
    snprintf(spec, sizeof spec, "%s=%d", axis, devices > 0 ? devices : -1);
    mt_launch_opts opts = {.mesh = spec, .devices = devices};
    return mt_launch(&opts, fn, arg);
}
