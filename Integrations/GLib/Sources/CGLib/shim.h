#ifndef CGLIB_SHIM_H
#define CGLIB_SHIM_H
#include <glib.h>
#endif
