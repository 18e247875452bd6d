/*
 * threads_impl.h — what the threads transport's files share (internal):
 * threads.c moves the bytes of the collectives, threads_p2p.c delivers the
 * point-to-point messages, threads_launch.c starts the device threads.
 */
#ifndef MT_THREADS_IMPL_H
#define MT_THREADS_IMPL_H

#include "comm/transport_impl.h"

#include <pthread.h>

/* A device's mailbox of point-to-point messages (threads_p2p.c). */
typedef struct mt_mailbox mt_mailbox;

/* The transport's shared state for one launch, in ls->transport. */
typedef struct {
    pthread_mutex_t mu;           /* guards `groups` (taken once per device and group) */
    struct tgroup  *groups;       /* the groups' shared memory (threads.c) */
    mt_mailbox     *boxes;        /* (n_boxes) one per device (threads_p2p.c) */
    int             n_boxes;
} mt_threads_shared;

/* The shared state (ls->transport); mt__threads_fini frees it (NULL:
 * nothing to do), messages never received included. */
mt_status mt__threads_init(mt_launch_state *ls);
void      mt__threads_fini(mt_launch_state *ls);

/* The table's launch: one thread per device of the mesh (device 0 on the
 * caller), in this process (threads_launch.c). */
mt_status mt__threads_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

/* ---- point-to-point messages (threads_p2p.c) ---------------------------- */

/* n empty mailboxes (NULL: out of memory), and freeing them with every
 * message still in them. */
mt_mailbox *mt__mailboxes_create(int n);
void        mt__mailboxes_free(mt_mailbox *boxes, int n);

/* After every device has returned: reports the messages nobody received
 * (mt__p2p_leftover, for the first device that has some) and frees them. */
void mt__mailboxes_close(mt_launch_state *ls, mt_mailbox *boxes, int n);

/* The table's send and recv (see mt_transport_ops). */
mt_status mt__threads_send(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                           size_t bytes);
mt_status mt__threads_recv(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf,
                           size_t bytes, size_t *got);

#endif /* MT_THREADS_IMPL_H */
