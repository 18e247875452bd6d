/*
 * threads_impl.h — what the threads transport's two files share (internal):
 * threads.c moves the bytes, threads_launch.c starts the device threads.
 */
#ifndef MT_THREADS_IMPL_H
#define MT_THREADS_IMPL_H

#include "comm/transport_impl.h"

/* The transport's shared state for one launch (the groups' shared memory),
 * in ls->transport; mt__threads_fini frees it (NULL: nothing to do). */
mt_status mt__threads_init(mt_launch_state *ls);
void      mt__threads_fini(mt_launch_state *ls);

/* The table's launch: one thread per device of the mesh (device 0 on the
 * caller), in this process (threads_launch.c). */
mt_status mt__threads_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

#endif /* MT_THREADS_IMPL_H */
