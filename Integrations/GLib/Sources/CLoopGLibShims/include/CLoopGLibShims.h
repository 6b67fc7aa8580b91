#ifndef CLOOP_GLIB_SHIMS_H
#define CLOOP_GLIB_SHIMS_H

// The GSource that hosts a loop in a GMainContext. GLib's source functions are C callbacks on a
// struct that embeds GSource; Swift cannot declare that struct, so it lives here and forwards each
// callback to Swift through function pointers, with the Swift object as `owner`.

#include <glib.h>

typedef struct CLoopGLibCallbacks {
    /// Returns TRUE if the source is ready now; sets *timeout (ms, -1 for none) otherwise.
    gboolean (*prepare)(void *owner, gint *timeout);
    /// Returns TRUE if the source is ready; `readable`: the loop's descriptor polled readable.
    gboolean (*check)(void *owner, gboolean readable);
    /// Runs what is due; returns FALSE to remove the source.
    gboolean (*dispatch)(void *owner);
    /// The source is being freed: release `owner`.
    void (*finalize)(void *owner);
} CLoopGLibCallbacks;

/// A new source watching `descriptor` for reading, calling `callbacks` with `owner`. Not attached.
/// The source may recurse, so GLib does not wake itself after each dispatch; while `dispatch` runs,
/// a nested iteration of the context sees the source as not ready (prepare and check are not
/// forwarded) and does not poll `descriptor`, so the loop is never re-entered from inside itself.
GSource *cloop_glib_source_new(int descriptor, const CLoopGLibCallbacks *callbacks, void *owner);

/// The GLib version this was built against, "major.minor.micro".
const char *cloop_glib_version(void);

#endif
