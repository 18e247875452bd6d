/*
 * registry.c — the runtime's registries: tables that a layer above adds
 * entries to from outside the library (a model, a strategy row), which the
 * library then finds by index like its own. Process-wide, as the kernel
 * thread count is (runtime.c): the runtime's state, not a layer's.
 *
 * Adding is rare (at start-up, before any run), reading is often (every
 * lookup): an entry is written before the count that publishes it
 * (release), and readers load the count first (acquire), so a reader never
 * sees a half-made entry. Two adders at once take a lock.
 */
#include "base/base_impl.h"

#include <pthread.h>
#include <stdatomic.h>

static struct {
    const void *entry[MT__REGISTRY_MAX];
    atomic_int  n;
} registries[MT__REGISTRY_COUNT];
static pthread_mutex_t adding = PTHREAD_MUTEX_INITIALIZER;

int mt__registry_add(mt__registry which, const void *entry) {
    if ((int)which < 0 || which >= MT__REGISTRY_COUNT || !entry) return -1;
    pthread_mutex_lock(&adding);
    int n = atomic_load_explicit(&registries[which].n, memory_order_relaxed);
    int at = n < MT__REGISTRY_MAX ? n : -1;
    if (at >= 0) {
        registries[which].entry[at] = entry;
        atomic_store_explicit(&registries[which].n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&adding);
    return at;
}

int mt__registry_count(mt__registry which) {
    if ((int)which < 0 || which >= MT__REGISTRY_COUNT) return 0;
    return atomic_load_explicit(&registries[which].n, memory_order_acquire);
}

const void *mt__registry_get(mt__registry which, int i) {
    return i >= 0 && i < mt__registry_count(which) ? registries[which].entry[i] : NULL;
}
