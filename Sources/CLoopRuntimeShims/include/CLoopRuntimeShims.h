// CLoopRuntimeShims: the Linux system interfaces LoopRuntime needs and Glibc does not export.
//
// Only thin, allocation-free wrappers live here. `struct epoll_event` is packed on x86_64, so the
// Swift side never touches it directly: it goes through the accessors below.
#ifndef CLOOP_RUNTIME_SHIMS_H
#define CLOOP_RUNTIME_SHIMS_H

#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static const uint32_t CLOOP_EPOLLIN = EPOLLIN;
static const uint32_t CLOOP_EPOLLOUT = EPOLLOUT;
static const uint32_t CLOOP_EPOLLERR = EPOLLERR;
static const uint32_t CLOOP_EPOLLHUP = EPOLLHUP;
static const uint32_t CLOOP_EPOLLRDHUP = EPOLLRDHUP;

/// epoll_create1(EPOLL_CLOEXEC).
// A token for the calling thread, unique for the life of the process (unlike `pthread_t`, which
// glibc reuses for a thread started after another one ended): 1 for the main thread, then 2, 3, …
// in the order threads first ask. One thread-local load after the first call.
extern __thread uint64_t cloop_thread_token_storage;
uint64_t cloop_assign_thread_token(void);
static inline uint64_t cloop_thread_token(void) {
    uint64_t token = cloop_thread_token_storage;
    return token != 0 ? token : cloop_assign_thread_token();
}

/// A hint to the CPU that the caller spins (x86 `pause`, Arm `yield`): the sibling hyperthread
/// and the memory system get the cycles a tight loop would burn.
static inline void cloop_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

static inline int cloop_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC).
static inline int cloop_eventfd_create(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/// timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC). CLOCK_BOOTTIME is the clock behind
/// Swift's ContinuousClock on Linux, so deadlines need no conversion.
static inline int cloop_timerfd_create(void) {
    return timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
}

/// Arms `fd` to expire at the absolute CLOCK_BOOTTIME time `deadline_ns`, or disarms it when
/// `deadline_ns` is negative. Re-arming also clears a pending expiration.
static inline int cloop_timerfd_arm(int fd, int64_t deadline_ns) {
    struct itimerspec spec = {0};
    if (deadline_ns >= 0) {
        if (deadline_ns == 0) deadline_ns = 1; // an all-zero it_value would disarm
        spec.it_value.tv_sec = (time_t)(deadline_ns / 1000000000);
        spec.it_value.tv_nsec = (long)(deadline_ns % 1000000000);
    }
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

/// Asks the CPU to start loading the cache line holding `address` (for writing). A hint only: it
/// never faults and changes no state. Used to overlap the cache misses of a large batch of due
/// timers, each a separate object touched in deadline order rather than memory order.
static inline void cloop_prefetch(const void *address) { __builtin_prefetch(address, 1, 3); }

/// Hands memory the allocator holds free back to the system (glibc's malloc_trim; a no-op with
/// other C libraries). glibc keeps freed small blocks on free lists for reuse and returns them
/// only when asked. The library never asks by itself: `Loop.returnFreeMemory()` is the
/// application's call.
static inline void cloop_return_free_memory(void) {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

/// Maps `bytes` (a multiple of 2 MiB) of private anonymous memory and, with `huge_pages`, asks for
/// transparent huge pages on it (`madvise(MADV_HUGEPAGE)`, a hint: the kernel may decline). NULL
/// on failure, with errno set. For large arrays that grow and shrink often: growing moves the
/// pages (`cloop_remap_memory`) instead of copying them, and with huge pages one fault per 2 MiB
/// instead of per 4 KiB page.
void *cloop_map_memory(size_t bytes, bool huge_pages);

/// Grows or shrinks a mapping made by `cloop_map_memory` to `new_bytes`, moving it if needed
/// (mremap(MREMAP_MAYMOVE): the pages move, their contents are not copied); shrinking gives the
/// cut pages back to the system. NULL on failure, with errno set and the old mapping intact.
void *cloop_remap_memory(void *address, size_t old_bytes, size_t new_bytes);

/// Unmaps a mapping made by `cloop_map_memory`: its pages go back to the system at once.
int cloop_unmap_memory(void *address, size_t bytes);

/// The current CLOCK_BOOTTIME time in nanoseconds.
static inline int64_t cloop_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

/// epoll_ctl with the event's data set to `token`.
static inline int cloop_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = token;
    return epoll_ctl(epfd, op, fd, &event);
}

static inline int cloop_epoll_ctl_add(void) { return EPOLL_CTL_ADD; }
static inline int cloop_epoll_ctl_mod(void) { return EPOLL_CTL_MOD; }
static inline int cloop_epoll_ctl_del(void) { return EPOLL_CTL_DEL; }

/// A buffer of `count` epoll events (freed with `cloop_epoll_events_free`).
struct epoll_event *cloop_epoll_events_alloc(int count);
void cloop_epoll_events_free(struct epoll_event *events);

static inline int cloop_epoll_wait(int epfd, struct epoll_event *events, int count, int timeout_ms) {
    return epoll_wait(epfd, events, count, timeout_ms);
}

static inline uint64_t cloop_epoll_event_token(const struct epoll_event *events, int index) {
    return events[index].data.u64;
}

static inline uint32_t cloop_epoll_event_flags(const struct epoll_event *events, int index) {
    return events[index].events;
}

/// Adds 1 to an eventfd counter.
static inline int cloop_eventfd_signal(int fd) {
    uint64_t one = 1;
    return (int)write(fd, &one, sizeof one);
}

/// Resets an eventfd counter; returns the number of bytes read (8), or -1 with errno.
static inline int cloop_eventfd_drain(int fd) {
    uint64_t value;
    return (int)read(fd, &value, sizeof value);
}

/// The calling thread's kernel thread id.
static inline int32_t cloop_gettid(void) { return (int32_t)syscall(SYS_gettid); }

/// A futex-based mutex on a 32-bit word (0 = unlocked). The atomics live in this C target, which
/// SwiftPM compiles with the thread sanitizer when asked, so the sanitizer sees every lock and
/// unlock (it cannot see inside Synchronization.Mutex's uninstrumented slow path).
void cloop_lock_acquire(uint32_t *word);
void cloop_lock_release(uint32_t *word);

/// libdispatch's hooks for a run loop that services the main queue (what CFRunLoop uses on
/// Linux): the main queue's wake-up handle (an eventfd) and the drain callback.
int cloop_dispatch_main_queue_handle(void);
void cloop_dispatch_drain_main_queue(void);

/// CPU time (user + system) of the calling thread, in microseconds.
void cloop_thread_cpu_microseconds(double *microseconds);

/// True on the process's main thread (recorded by a constructor when the library loads).
bool cloop_is_main_thread(void);

/// The process's main thread.
pthread_t cloop_main_thread(void);

static inline int cloop_errno(void) { return errno; }

/// The kernel's id of the calling thread (gettid): the `tid` of a trace's events.
int32_t cloop_thread_id(void);

/// The number of processors in the calling thread's affinity mask (`sched_getaffinity`, any mask
/// size), or -1 with errno set if it cannot be read.
int32_t cloop_affinity_processor_count(void);

/// The process id: the `pid` of a trace's events.
int32_t cloop_process_id(void);

/// Copies the calling thread's name into `buffer` (pthread_getname_np); 0 on success.
int cloop_current_thread_name(char *buffer, size_t length);

/// Names the calling thread (pthread_setname_np; at most 15 bytes are kept); 0 on success.
int cloop_set_current_thread_name(const char *name);

#endif
