/*
 * confine.h: what a daemon served on /dev/fd/N holds (confine.c).
 */
#ifndef STFS_CONFINE_H
#define STFS_CONFINE_H

/* A daemon on the mounter's descriptor fd (-1: a path mountpoint, nothing
 * to do): not dumpable; with STFS_CONFINE=1 in the environment also no
 * descriptor but 0-2 and fd, no_new_privs, an empty bounding set and no
 * capability.  0, or -errno after saying on stderr (for src) what could
 * not be done. */
int stfs_confine_fd_daemon(const char *src, int fd);

#endif
