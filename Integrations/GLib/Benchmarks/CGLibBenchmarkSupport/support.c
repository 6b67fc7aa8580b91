#define _GNU_SOURCE
#include "CGLibBenchmarkSupport.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

int cglib_bench_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

void cglib_bench_eventfd_signal(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {}
}

void cglib_bench_eventfd_wait(int fd) {
    struct pollfd entry = {.fd = fd, .events = POLLIN};
    uint64_t value;
    for (;;) {
        while (poll(&entry, 1, -1) < 1) {}
        if (read(fd, &value, sizeof value) == sizeof value) return;
    }
}

double cglib_bench_thread_cpu_microseconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_THREAD, &usage);
    return (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
        + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}
