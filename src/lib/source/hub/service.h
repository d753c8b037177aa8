/*
 * service.h: what the Hub's room (hub/) offers the locator's owner
 * (services.c): the locate function of its entry in the service table
 * (struct stfs_service, locate.h).
 */
#ifndef STFS_HUB_SERVICE_H
#define STFS_HUB_SERVICE_H

#include "source.h"

/* The locator of hf:// (hub.c): loc->arg is set. */
int stfs_locate_hf(struct stfs_location *loc, struct stfs_error *err);

#endif
