/*
 * fetch.c: the block engine's fetch interface as HTTP fills it in (struct
 * stfs_fetch_ops, blocks/blocks.h): a libcurl handle for each fetching
 * thread, and a range of an object fetched through its redirect,
 * resolved once (stfs_object_fetch(), resolve.c).  remote.c gives it to
 * the engine; the engine calls nothing of http/ by name.
 */
#include <curl/curl.h>
#include <stddef.h>

#include "engine.h"
#include "http/http.h"

static void *handle_new(void)
{
	return curl_easy_init();
}

static void handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static int fetch(struct stfs_object *o, void *h,
		 const struct stfs_request *q, char *buf, size_t *got,
		 struct stfs_error *err)
{
	return stfs_object_fetch(o, h, q, buf, got, NULL, err);
}

/* static, and handed out by a function: an exported object would carry
 * a writable ODR indicator under ASan (test_globals.py) */
static const struct stfs_fetch_ops ops = {
	.handle_new = handle_new,
	.handle_free = handle_free,
	.fetch = fetch,
};

const struct stfs_fetch_ops *stfs_http_fetch_ops(void)
{
	return &ops;
}
