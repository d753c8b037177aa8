/*
 * transfer.h: running a prepared libcurl easy handle on a transfer
 * thread (transfer.c); for http.c alone.
 */
#ifndef STFS_TRANSFER_H
#define STFS_TRANSFER_H

#include <curl/curl.h>

/* Run the transfer h is set up for, as curl_easy_perform() would, its
 * callbacks called on a transfer thread; wait for it and return its
 * result.  Meanwhile, each stfs_transfer_wake() for h has hook(arg) (if
 * not NULL) called on this, the caller's, thread.  Any number of threads
 * may call this at once. */
CURLcode stfs_transfer(CURL *h, void (*hook)(void *arg), void *arg);

/* From a callback of h's transfer: have its caller run its hook. */
void stfs_transfer_wake(CURL *h);

/* Stop the transfer threads once their transfers are done; the next
 * stfs_transfer() starts them again. */
void stfs_transfer_stop(void);

#endif
