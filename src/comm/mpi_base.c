/*
 * mpi_base.c — what every file of the MPI transport uses, at the bottom of
 * them: MPI's failures as statuses, and blocks of bytes as MPI counts.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <limits.h>
#include <stdio.h>

mt_status mt__mpi_error(int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return mt_fail(MT_EINTERNAL, "%s failed: %s", what, text);
}

/* The collectives that only move bytes send a block of `bytes` as *count
 * elements of *type: MPI_BYTE up to INT_MAX, and above that (MPI counts are
 * int) one element of a datatype exactly `bytes` long, made of 1 GiB chunks
 * and the remainder. The caller frees a made type (*made) once it is posted:
 * MPI keeps it alive until the communication is done. */
mt_status mt__mpi_block_type(size_t bytes, MPI_Datatype *type, int *count, bool *made) {
    *made = false;
    if (bytes <= (size_t)INT_MAX) {
        *type = MPI_BYTE;
        *count = (int)bytes;
        return MT_OK;
    }
    const size_t chunk = (size_t)1 << 30;
    if (bytes / chunk > (size_t)INT_MAX)
        return mt_fail(MT_EUNSUPPORTED, "a block of %zu bytes is more than MPI can describe", bytes);
    MPI_Datatype gib;
    int rc = MPI_Type_contiguous((int)chunk, MPI_BYTE, &gib);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Type_contiguous");
    int lens[2] = {(int)(bytes / chunk), (int)(bytes % chunk)};
    MPI_Aint disp[2] = {0, (MPI_Aint)(bytes / chunk * chunk)};
    MPI_Datatype parts[2] = {gib, MPI_BYTE};
    rc = MPI_Type_create_struct(2, lens, disp, parts, type);
    MPI_Type_free(&gib);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Type_create_struct");
    if ((rc = MPI_Type_commit(type)) != MPI_SUCCESS) {
        MPI_Type_free(type);
        return mt__mpi_error(rc, "MPI_Type_commit");
    }
    *count = 1;
    *made = true;
    return MT_OK;
}

#endif /* MT_HAVE_MPI */
