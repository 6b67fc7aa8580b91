#define _GNU_SOURCE
#include "CLoopRuntimeShims.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdatomic.h>
#include <string.h>

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_t cloop_main_thread_id;

// Constructors run on the main thread before `main`, so this records the main thread even when
// `Loop.main` is first asked for from another thread.
__attribute__((constructor)) static void cloop_record_main_thread(void) {
    cloop_main_thread_id = pthread_self();
    cloop_thread_token_storage = 1;
}

__thread uint64_t cloop_thread_token_storage = 0;
static _Atomic uint64_t cloop_next_thread_token = 2;

uint64_t cloop_assign_thread_token(void) {
    uint64_t token = atomic_fetch_add_explicit(&cloop_next_thread_token, 1, memory_order_relaxed);
    cloop_thread_token_storage = token;
    return token;
}

bool cloop_is_main_thread(void) { return pthread_equal(pthread_self(), cloop_main_thread_id) != 0; }

pthread_t cloop_main_thread(void) { return cloop_main_thread_id; }

int32_t cloop_thread_id(void) { return (int32_t)syscall(SYS_gettid); }

int32_t cloop_affinity_processor_count(void) {
    // A fixed cpu_set_t holds 1024 processors; a larger machine needs a bigger mask (EINVAL).
    for (size_t processors = 1024; processors <= (1u << 20); processors *= 2) {
        size_t size = CPU_ALLOC_SIZE(processors);
        cpu_set_t *set = CPU_ALLOC(processors);
        if (set == NULL) return -1;
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            int32_t count = (int32_t)CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return count;
        }
        int error = errno;
        CPU_FREE(set);
        if (error != EINVAL) {
            errno = error;
            return -1;
        }
    }
    errno = EINVAL;
    return -1;
}

int32_t cloop_process_id(void) { return (int32_t)getpid(); }

struct epoll_event *cloop_epoll_events_alloc(int count) {
    return calloc((size_t)count, sizeof(struct epoll_event));
}

void cloop_epoll_events_free(struct epoll_event *events) { free(events); }

int cloop_current_thread_name(char *buffer, size_t length) {
    return pthread_getname_np(pthread_self(), buffer, length);
}

int cloop_set_current_thread_name(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    return pthread_setname_np(pthread_self(), truncated);
}

// Drepper's "Futexes Are Tricky" mutex 2: 0 unlocked, 1 locked, 2 locked with waiters.
/// The CPU's hint that this is a spin-wait loop: it saves power and lets a sibling hyper-thread run.
static inline void cloop_spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
    // Other architectures: no hint; the loop only spins 64 times before it sleeps in the kernel.
}

void cloop_lock_acquire(uint32_t *word) {
    _Atomic uint32_t *state = (_Atomic uint32_t *)word;
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(state, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        return;
    }
    for (int spin = 0; spin < 64; spin++) {
        cloop_spin_hint();
        expected = 0;
        if (atomic_load_explicit(state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(state, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed)) {
            return;
        }
    }
    uint32_t current = atomic_exchange_explicit(state, 2, memory_order_acquire);
    while (current != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        current = atomic_exchange_explicit(state, 2, memory_order_acquire);
    }
}

void cloop_lock_release(uint32_t *word) {
    _Atomic uint32_t *state = (_Atomic uint32_t *)word;
    if (atomic_fetch_sub_explicit(state, 1, memory_order_release) != 1) {
        atomic_store_explicit(state, 0, memory_order_release);
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

// Exported by libdispatch for CoreFoundation; declared here because no public header has them.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);

int cloop_dispatch_main_queue_handle(void) { return _dispatch_get_main_queue_handle_4CF(); }

void cloop_dispatch_drain_main_queue(void) { _dispatch_main_queue_callback_4CF(NULL); }

void cloop_thread_cpu_microseconds(double *microseconds) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    *microseconds = (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec +
                    (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
}

void *cloop_map_memory(size_t bytes, bool huge_pages) {
    void *address = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) return NULL;
    if (huge_pages) (void)madvise(address, bytes, MADV_HUGEPAGE);  // a hint; EINVAL without THP
    return address;
}

void *cloop_remap_memory(void *address, size_t old_bytes, size_t new_bytes) {
    void *moved = mremap(address, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (moved == MAP_FAILED) return NULL;
    if (new_bytes > old_bytes) (void)madvise(moved, new_bytes, MADV_HUGEPAGE);
    return moved;
}

int cloop_unmap_memory(void *address, size_t bytes) { return munmap(address, bytes); }
