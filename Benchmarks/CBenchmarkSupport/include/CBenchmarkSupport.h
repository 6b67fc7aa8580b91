// Support for LoopBenchmarks only: an allocation counter (malloc & co. are interposed in the
// benchmark executable; glibc exports the real implementations as __libc_*) and per-thread CPU
// usage.
#ifndef CBENCHMARK_SUPPORT_H
#define CBENCHMARK_SUPPORT_H

#include <stdint.h>

/// Allocations (malloc, calloc, realloc, memalign family) made so far by any thread.
uint64_t cmalloc_counter_allocations(void);

/// CPU time (user + system, microseconds) and context switches of the calling thread.
void cbench_thread_usage(double *cpu_microseconds, double *context_switches);

#endif
