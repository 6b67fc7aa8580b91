#include "CLoopGLibShims.h"

#include <stdio.h>

typedef struct {
    GSource source;
    gpointer tag;                 // the descriptor's tag from g_source_add_unix_fd
    CLoopGLibCallbacks callbacks; // copied: the caller's struct need not outlive the source
    void *owner;
} CLoopGLibSource;

static gboolean cloop_prepare(GSource *source, gint *timeout) {
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    *timeout = -1;
    return self->callbacks.prepare(self->owner, timeout);
}

static gboolean cloop_check(GSource *source) {
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    gboolean readable = (g_source_query_unix_fd(source, self->tag) & G_IO_IN) != 0;
    return self->callbacks.check(self->owner, readable);
}

static gboolean cloop_dispatch(GSource *source, GSourceFunc callback, gpointer user_data) {
    (void)callback;
    (void)user_data;
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    return self->callbacks.dispatch(self->owner);
}

static void cloop_finalize(GSource *source) {
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    if (self->owner != NULL) self->callbacks.finalize(self->owner);
    self->owner = NULL;
}

static GSourceFuncs cloop_source_funcs = {
    .prepare = cloop_prepare,
    .check = cloop_check,
    .dispatch = cloop_dispatch,
    .finalize = cloop_finalize,
};

GSource *cloop_glib_source_new(int descriptor, const CLoopGLibCallbacks *callbacks, void *owner) {
    GSource *source = g_source_new(&cloop_source_funcs, sizeof(CLoopGLibSource));
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    self->callbacks = *callbacks;
    self->owner = owner;
    self->tag = g_source_add_unix_fd(source, descriptor, G_IO_IN);
    g_source_set_name(source, "LoopRuntime hosted loop");
    return source;
}

const char *cloop_glib_version(void) {
    static char version[32];
    snprintf(version, sizeof version, "%u.%u.%u", glib_major_version, glib_minor_version, glib_micro_version);
    return version;
}
