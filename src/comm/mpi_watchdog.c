/*
 * mpi_watchdog.c — a bound on the MPI transport's blocking calls.
 *
 * Everything a launch waits for in a collective or a message is posted
 * non-blocking and polled against the timeout (mpi_ctl.c), but a launch's
 * set-up still makes communicators with blocking calls (MPI_Comm_split and
 * MPI_Comm_dup have no non-blocking form in MPI 3 but MPI_Comm_idup, and the
 * splits are per launch), and the end of the control channel waits for its
 * last sends. Every rank has arrived at the launch when they run, but one
 * may be stopped (SIGSTOP), die or lose its network inside them, and a
 * blocking call then never returns: the job would hang until mpirun is
 * killed (test_hosts_faults' stop case, before this file).
 *
 * So the launch brackets those calls with mt__mpi_guard / mt__mpi_unguard,
 * and a thread of this process (started on the first guard, one per
 * process, and idle in a condition wait between guards) ends the process
 * when a guarded call outlasts the timeout: it prints the message and
 * _exits with MT_MPI_EXIT_LOST. It cannot call MPI_Abort (the transport
 * runs MPI_THREAD_FUNNELED: only the main thread calls MPI), but mpirun ends
 * the job when one of its processes exits non-zero. The state below is
 * process-wide, as MPI's is, behind the mutex.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t  dog_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t dog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  dog_cond = PTHREAD_COND_INITIALIZER;
static bool            dog_started;     /* the thread runs */
static bool            dog_armed;       /* a guarded call is running */
static struct timespec dog_deadline;    /* CLOCK_REALTIME: when it has taken too long */
static char            dog_msg[768];    /* what the thread prints then */

static void *dog_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&dog_lock);
    for (;;) {
        if (!dog_armed) {
            pthread_cond_wait(&dog_cond, &dog_lock);
            continue;
        }
        struct timespec until = dog_deadline;
        if (pthread_cond_timedwait(&dog_cond, &dog_lock, &until) == 0) continue;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        const bool late = now.tv_sec > dog_deadline.tv_sec ||
                          (now.tv_sec == dog_deadline.tv_sec && now.tv_nsec >= dog_deadline.tv_nsec);
        if (dog_armed && late) {
            /* one write, as the other ranks' messages are one each */
            fprintf(stderr, "meshtrain: %s\n", dog_msg);
            fflush(stderr);
            _exit(MT_MPI_EXIT_LOST);
        }
    }
    return NULL;
}

static void dog_start(void) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    dog_started = pthread_create(&t, &attr, dog_main, NULL) == 0;
    pthread_attr_destroy(&attr);
}

void mt__mpi_guard(const mt_mpi *m, const char *what) {
    pthread_once(&dog_once, dog_start);
    if (!dog_started) return;   /* no thread: the call is unbounded, as before */
    char others[128] = "";
    if (m->size <= 9) {
        for (int r = 0; r < m->size; r++)
            if (r != m->rank) {
                size_t len = strlen(others);
                snprintf(others + len, sizeof others - len, "%s%d", len ? ", " : "device ", r);
            }
    } else {
        snprintf(others, sizeof others, "the %d", m->size - 1);
    }
    pthread_mutex_lock(&dog_lock);
    snprintf(dog_msg, sizeof dog_msg, "device %d: %s did not complete within %.3g s, though "
             "every device had arrived at the launch: another device (of %s) died, was stopped "
             "or lost its network during it; stopping this rank (exit %d) and so the job "
             "(MT_COMM_TIMEOUT). Resume from the last checkpoint on the devices left",
             m->rank, what, m->timeout_s, others, MT_MPI_EXIT_LOST);
    clock_gettime(CLOCK_REALTIME, &dog_deadline);
    const double s = m->timeout_s;
    dog_deadline.tv_sec += (time_t)s;
    dog_deadline.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (dog_deadline.tv_nsec >= 1000000000L) dog_deadline.tv_sec++, dog_deadline.tv_nsec -= 1000000000L;
    dog_armed = true;
    pthread_cond_signal(&dog_cond);
    pthread_mutex_unlock(&dog_lock);
}

void mt__mpi_unguard(void) {
    if (!dog_started) return;
    pthread_mutex_lock(&dog_lock);
    dog_armed = false;
    pthread_cond_signal(&dog_cond);
    pthread_mutex_unlock(&dog_lock);
}

#endif /* MT_HAVE_MPI */
