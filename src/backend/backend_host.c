/*
 * backend_host.c — the host's streams and events (backend_impl.h): every
 * backend's default and the CPU's. Work is done when its call returns,
 * except comm's asynchronous collectives, whose request an event holds
 * until it is waited for.
 */
#include "backend/backend_impl.h"

#include <stdlib.h>

struct mt_backend_stream { mt_ctx *ctx; };

mt_status mt__host_stream_create(mt_ctx *ctx, mt_backend_stream **out) {
    if (!(*out = calloc(1, sizeof **out)))
        return mt_fail(MT_ENOMEM, "out of memory for a stream");
    (*out)->ctx = ctx;
    return MT_OK;
}

void mt__host_stream_free(mt_backend_stream *stream) { free(stream); }

mt_status mt__host_event_record(mt_backend_stream *stream, mt_backend_event *ev,
                                const mt_request *req) {
    if (req && !stream->ctx)
        return mt_fail(MT_EINVAL, "an event records a comm request on a stream made without "
                       "a device; create the stream with the device's ctx");
    *ev = (mt_backend_event){.req = req ? *req : (mt_request){0}, .pending = req != NULL};
    return MT_OK;
}

mt_status mt__host_event_query(mt_backend_stream *stream, mt_backend_event *ev, bool *done) {
    (void)stream;
    *done = !ev->pending;
    return MT_OK;
}

mt_status mt__host_event_wait(mt_backend_stream *stream, mt_backend_event *ev) {
    if (!ev->pending) return MT_OK;
    ev->pending = false;
    return mt_wait(stream->ctx, &ev->req);
}
