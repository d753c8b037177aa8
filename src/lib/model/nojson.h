/*
 * nojson.h: put in front of every model/ source by the build
 * (src/lib/meson.build, "-include"), so that json-c, which the format
 * layer uses to read JSON, never leaks into the model layer: naming one of
 * its types here, or including its headers, fails the compile.  The model
 * layer writes JSON with format/jsonw.c and reads an index's metadata as
 * the C strings format/index.h hands up.
 */
#ifndef STFS_NOJSON_H
#define STFS_NOJSON_H
#pragma GCC poison json_object json_tokener json_type
#endif
