/*
 * mem.c: memory hints for the few large buffers a big header needs (the
 * header text, the unescaped-name arena, the tensor records, the tree),
 * and the one growing-array helper.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "format.h"

#define HUGE_PAGE (2u << 20)

void stfs_hint_huge(void *p, size_t n, int fill)
{
	uintptr_t a, b;

	(void)a;
	(void)b;
#ifdef MADV_HUGEPAGE
	a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
	b = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);

	if (p && b > a)
		(void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
	/* fault the pages in with one call instead of one trap each */
	a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	b = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	if (fill && p && b > a && n >= HUGE_PAGE)
		(void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#endif
}

int stfs_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (elem && ncap > SIZE_MAX / elem)
		return -ENOMEM;
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	stfs_hint_huge((char *)np + *cap * elem, (ncap - *cap) * elem, 0);
	*p = np;
	*cap = ncap;
	return 0;
}
