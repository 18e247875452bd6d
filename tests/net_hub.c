/*
 * net_hub.c — a network hub for the namespace hosts of the tests
 * (tests/hosts.sh), with delay, loss and links that go down: what netem
 * would do, for kernels without sch_netem.
 *
 *   net_hub [--delay-ms D] [--loss P] [--seed S] [--ctl FIFO] TAP...
 *
 * Creates one TAP device per name (Ethernet frames, no packet header) in the
 * namespace it runs in and prints "ready" on stdout; the caller then moves
 * each device into its host's namespace (`ip link set TAP netns NS`: the
 * descriptor held here stays valid) and gives it the host's address. Every
 * frame read from one device is written to every other one (a hub: the
 * hosts' own addresses sort out what is theirs) D ms later, each copy
 * dropped with probability P (a fixed-seed generator, so a run's losses are
 * the same each time). Lines on the control FIFO: "down I" drops every
 * frame to and from device I (0-based) from then on, "up I" ends that.
 * Runs until killed (SIGTERM); the devices go with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_TAPS 16
#define MAX_FRAME 65536
#define MAX_HELD 4096   /* frames in flight; past it a frame is dropped, as a full queue would */

typedef struct {
    double   due;        /* when it is written (s, CLOCK_MONOTONIC) */
    int      to;         /* device index */
    size_t   len;
    uint8_t *data;       /* (len) the frame */
} held_frame;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* xorshift64*: the loss draws, uniform in [0, 1) */
static double draw(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int open_tap(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
    if (fd < 0) {
        fprintf(stderr, "net_hub: cannot open /dev/net/tun: %s (needs root and the tun module)\n",
                strerror(errno));
        return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        fprintf(stderr, "net_hub: cannot create TAP device '%s': %s\n", name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* One control line: "down I" / "up I". */
static void control(const char *line, int n, int *down) {
    int i = -1;
    if (sscanf(line, "down %d", &i) == 1 && i >= 0 && i < n) down[i] = 1;
    else if (sscanf(line, "up %d", &i) == 1 && i >= 0 && i < n) down[i] = 0;
    else fprintf(stderr, "net_hub: control line '%s' ignored (want 'down I' or 'up I', I < %d)\n",
                 line, n);
}

int main(int argc, char **argv) {
    double delay = 0, loss = 0;
    uint64_t seed = 1;
    const char *ctl_path = NULL;
    int a = 1;
    for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
        if (!strcmp(argv[a], "--delay-ms")) delay = atof(argv[a + 1]) / 1000;
        else if (!strcmp(argv[a], "--loss")) loss = atof(argv[a + 1]);
        else if (!strcmp(argv[a], "--seed")) seed = strtoull(argv[a + 1], NULL, 10) | 1;
        else if (!strcmp(argv[a], "--ctl")) ctl_path = argv[a + 1];
        else break;
    }
    const int n = argc - a;
    if (n < 2 || n > MAX_TAPS || delay < 0 || loss < 0 || loss >= 1) {
        fprintf(stderr, "usage: net_hub [--delay-ms D>=0] [--loss 0<=P<1] [--seed S] [--ctl FIFO] "
                "TAP TAP... (2 to %d devices)\n", MAX_TAPS);
        return 2;
    }
    struct pollfd pf[MAX_TAPS + 1];
    int down[MAX_TAPS] = {0};
    for (int i = 0; i < n; i++) {
        if ((pf[i].fd = open_tap(argv[a + i])) < 0) return 1;
        pf[i].events = POLLIN;
    }
    int nfds = n;
    if (ctl_path) {
        /* O_RDWR: the FIFO never reads as closed when a writer goes */
        if ((pf[n].fd = open(ctl_path, O_RDWR | O_NONBLOCK)) < 0) {
            fprintf(stderr, "net_hub: cannot open the control FIFO '%s': %s\n", ctl_path,
                    strerror(errno));
            return 1;
        }
        pf[n].events = POLLIN;
        nfds = n + 1;
    }
    printf("ready\n");
    fflush(stdout);

    held_frame *held = calloc(MAX_HELD, sizeof *held);   /* (MAX_HELD) a ring, in due order */
    uint8_t *buf = malloc(MAX_FRAME);                      /* (MAX_FRAME) one frame read */
    char line[256];
    size_t line_len = 0;
    if (!held || !buf) return 1;
    int head = 0, count = 0;
    for (;;) {
        /* write what is due (the ring is in due order: one delay for all) */
        double t = now_s();
        while (count > 0 && held[head].due <= t) {
            held_frame *h = &held[head];
            if (!down[h->to] && write(pf[h->to].fd, h->data, h->len) < 0 && errno != EAGAIN)
                fprintf(stderr, "net_hub: write to device %d: %s\n", h->to, strerror(errno));
            free(h->data);
            head = (head + 1) % MAX_HELD, count--;
        }
        /* to the microsecond: poll's milliseconds made a 50 us delay 1 ms */
        struct timespec wait, *until_due = NULL;
        if (count > 0) {
            double w = held[head].due - t;
            if (w < 0) w = 0;
            wait.tv_sec = (time_t)w;
            wait.tv_nsec = (long)((w - (double)wait.tv_sec) * 1e9);
            until_due = &wait;
        }
        if (ppoll(pf, (nfds_t)nfds, until_due, NULL) < 0 && errno != EINTR) return 1;
        for (int i = 0; i < n; i++) {
            if (!(pf[i].revents & POLLIN)) continue;
            ssize_t len;
            while ((len = read(pf[i].fd, buf, MAX_FRAME)) > 0) {
                if (down[i]) continue;
                for (int j = 0; j < n; j++) {
                    if (j == i || down[j] || draw(&seed) < loss || count == MAX_HELD) continue;
                    held_frame *h = &held[(head + count) % MAX_HELD];
                    if (!(h->data = malloc((size_t)len))) continue;
                    memcpy(h->data, buf, (size_t)len);
                    h->len = (size_t)len, h->to = j, h->due = now_s() + delay;
                    count++;
                }
            }
        }
        if (nfds > n && (pf[n].revents & POLLIN)) {
            ssize_t got = read(pf[n].fd, line + line_len, sizeof line - 1 - line_len);
            if (got > 0) line_len += (size_t)got;
            line[line_len] = 0;
            char *nl;
            while ((nl = strchr(line, '\n'))) {
                *nl = 0;
                control(line, n, down);
                memmove(line, nl + 1, strlen(nl + 1) + 1);
                line_len = strlen(line);
            }
            if (line_len == sizeof line - 1) line_len = 0;   /* a line too long: dropped */
        }
    }
}
