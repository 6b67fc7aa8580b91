#define _GNU_SOURCE
#include "CBenchmarkSupport.h"

#include <sys/resource.h>

#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static _Atomic uint64_t allocations;

uint64_t cmalloc_counter_allocations(void) {
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

static inline void count(void) { atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); }

void *malloc(size_t size) {
    count();
    return __libc_malloc(size);
}

void *calloc(size_t count_, size_t size) {
    count();
    return __libc_calloc(count_, size);
}

void *realloc(void *pointer, size_t size) {
    count();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

void *memalign(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    count();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *result = pointer;
    return 0;
}

void cbench_thread_usage(double *cpu_microseconds, double *context_switches) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    *cpu_microseconds = (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec +
                        (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
    *context_switches = (double)(usage.ru_nvcsw + usage.ru_nivcsw);
}

void cbench_thread_split(double *user_microseconds, double *system_microseconds, double *minor_faults) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    *user_microseconds = (double)usage.ru_utime.tv_sec * 1e6 + (double)usage.ru_utime.tv_usec;
    *system_microseconds = (double)usage.ru_stime.tv_sec * 1e6 + (double)usage.ru_stime.tv_usec;
    *minor_faults = (double)usage.ru_minflt;
}
