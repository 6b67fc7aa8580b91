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

/// User and system CPU time (microseconds) and minor page faults of the calling thread, to split
/// a timed figure into the code's own work and the kernel's.
void cbench_thread_split(double *user_microseconds, double *system_microseconds, double *minor_faults);

#endif
