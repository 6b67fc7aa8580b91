#define _GNU_SOURCE
#include "CLoopRuntimeShims.h"

#include <string.h>

#include <stdlib.h>

static pthread_t cloop_main_thread_id;

// Constructors run on the main thread before `main`, so this records the main thread even when
// `Loop.main` is first asked for from another thread.
__attribute__((constructor)) static void cloop_record_main_thread(void) {
    cloop_main_thread_id = pthread_self();
}

bool cloop_is_main_thread(void) { return pthread_equal(pthread_self(), cloop_main_thread_id) != 0; }

pthread_t cloop_main_thread(void) { return cloop_main_thread_id; }

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
