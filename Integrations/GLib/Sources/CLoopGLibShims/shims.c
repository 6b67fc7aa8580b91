#include "CLoopGLibShims.h"

#include <stdio.h>

// The source may recurse (g_source_set_can_recurse), so that GLib does not block and unblock it
// around each dispatch: unblocking adds its descriptor back to the context's polls, which makes
// GLib signal its own wake-up descriptor — one more iteration of the context after every dispatch.
// A nested iteration of the context from inside the loop's dispatch (a callout that iterates it)
// must still not re-enter the loop, so the source does what GLib's blocking would: while it
// dispatches, it is never ready, and its descriptor leaves the polls until the dispatch returns
// (else a readable loop descriptor would make a blocking nested iteration spin).
typedef struct {
    GSource source;
    int descriptor;
    gpointer tag;                 // from g_source_add_unix_fd; NULL while set aside
    gboolean dispatching;         // inside callbacks.dispatch
    CLoopGLibCallbacks callbacks; // copied: the caller's struct need not outlive the source
    void *owner;
} CLoopGLibSource;

static gboolean cloop_prepare(GSource *source, gint *timeout) {
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    *timeout = -1;
    if (self->dispatching) {  // a nested iteration, from inside the loop's dispatch
        if (self->tag != NULL) {
            g_source_remove_unix_fd(source, self->tag);
            self->tag = NULL;
        }
        return FALSE;
    }
    return self->callbacks.prepare(self->owner, timeout);
}

static gboolean cloop_check(GSource *source) {
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    if (self->dispatching || self->tag == NULL) return FALSE;
    gboolean readable = (g_source_query_unix_fd(source, self->tag) & G_IO_IN) != 0;
    return self->callbacks.check(self->owner, readable);
}

static gboolean cloop_dispatch(GSource *source, GSourceFunc callback, gpointer user_data) {
    (void)callback;
    (void)user_data;
    CLoopGLibSource *self = (CLoopGLibSource *)source;
    self->dispatching = TRUE;
    gboolean keep = self->callbacks.dispatch(self->owner);
    self->dispatching = FALSE;
    if (keep && self->tag == NULL && !g_source_is_destroyed(source)) {
        self->tag = g_source_add_unix_fd(source, self->descriptor, G_IO_IN);  // after a nested iteration
    }
    return keep;
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
    self->descriptor = descriptor;
    self->dispatching = FALSE;
    self->tag = g_source_add_unix_fd(source, descriptor, G_IO_IN);
    g_source_set_can_recurse(source, TRUE);
    g_source_set_name(source, "LoopRuntime hosted loop");
    return source;
}

const char *cloop_glib_version(void) {
    static char version[32];
    snprintf(version, sizeof version, "%u.%u.%u", glib_major_version, glib_minor_version, glib_micro_version);
    return version;
}
