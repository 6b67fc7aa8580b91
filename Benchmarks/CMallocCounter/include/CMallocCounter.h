// Counts heap allocations of the whole process by interposing malloc & co. in the benchmark
// executable (glibc exports the real implementations as __libc_*). Used only by LoopBenchmarks.
#ifndef CMALLOC_COUNTER_H
#define CMALLOC_COUNTER_H

#include <stdint.h>

/// Allocations (malloc, calloc, realloc, memalign family) made so far by any thread.
uint64_t cmalloc_counter_allocations(void);

#endif
