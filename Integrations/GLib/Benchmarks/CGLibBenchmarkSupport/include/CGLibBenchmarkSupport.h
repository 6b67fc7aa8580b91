#ifndef CGLIB_BENCHMARK_SUPPORT_H
#define CGLIB_BENCHMARK_SUPPORT_H

// What the GLib benchmarks need from the system that Swift's Glibc module does not export: an
// eventfd to build the floor with, and the calling thread's CPU time.

#include <stdint.h>

/// A new non-blocking eventfd (close it with close(2)); -1 and errno on failure.
int cglib_bench_eventfd(void);

/// Adds 1 to the eventfd's counter.
void cglib_bench_eventfd_signal(int fd);

/// Blocks in poll(2) until the eventfd is readable, then resets its counter.
void cglib_bench_eventfd_wait(int fd);

/// The calling thread's user + system CPU time, in microseconds (getrusage RUSAGE_THREAD).
double cglib_bench_thread_cpu_microseconds(void);

#endif
