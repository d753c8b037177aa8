/*
 * torch_keys.c: a pickled dict's keys as Python sees them.  Keys Python
 * holds equal (1, True and 1.0; 0, False, 0.0 and -0.0; two equal
 * strings) are one key, as in the dict torch.load makes: the first names
 * the entry and the last one's value wins.  A key is a name segment as
 * Python writes it: a string as is, an int in decimal, True, False,
 * None, a float as repr() writes it (1.5, 1e-05, inf).  Any other key (a
 * tuple, bytes, an int past 64 bits, a NaN) has a reason instead.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "torch_walk.h"

enum { KC_NONE, KC_NUM, KC_STR, KC_OTHER };

static int kclass(const struct stfs_pk_val *k)
{
	switch (k->kind) {
	case STFS_PK_NONE:
		return KC_NONE;
	case STFS_PK_BOOL:
		return KC_NUM;
	case STFS_PK_INT:
		return k->big ? KC_OTHER : KC_NUM;
	case STFS_PK_FLOAT:
		return isnan(k->u.f) ? KC_OTHER : KC_NUM;
	case STFS_PK_STR:
		return KC_STR;
	default:
		return KC_OTHER;
	}
}

/* An int64 against a double (not NaN), exactly. */
static int cmp_int_float(int64_t a, double b)
{
	int64_t t;
	double f;

	if (b < -9223372036854775808.0)
		return 1;
	if (b >= 9223372036854775808.0)
		return -1;
	t = (int64_t)b;                /* b truncated: exact */
	if (a != t)
		return a < t ? -1 : 1;
	f = b - (double)t;             /* b's fraction: exact */
	return f > 0 ? -1 : f < 0;
}

static int cmp_num(const struct stfs_pk_val *x, const struct stfs_pk_val *y)
{
	int xf = x->kind == STFS_PK_FLOAT, yf = y->kind == STFS_PK_FLOAT;

	if (!xf && !yf)
		return x->u.i < y->u.i ? -1 : x->u.i > y->u.i;
	if (xf && yf)
		return x->u.f < y->u.f ? -1 : x->u.f > y->u.f;
	return xf ? -cmp_int_float(y->u.i, x->u.f)
		  : cmp_int_float(x->u.i, y->u.f);
}

struct kent {
	const struct stfs_pk_val *k;
	size_t i;
};

/* 0: the keys are one key to Python. */
static int key_cmp(const struct kent *x, const struct kent *y)
{
	int cx = kclass(x->k), cy = kclass(y->k);

	if (cx != cy)
		return cx < cy ? -1 : 1;
	if (cx == KC_NUM)
		return cmp_num(x->k, y->k);
	if (cx == KC_STR)
		return stfs_bytes_cmp(x->k->u.str.s, x->k->u.str.n,
				      y->k->u.str.s, y->k->u.str.n);
	if (cx == KC_NONE)
		return 0;
	return x->i < y->i ? -1 : x->i > y->i;   /* never equal */
}

static int kent_cmp(const void *a, const void *b)
{
	const struct kent *x = a, *y = b;
	int c = key_cmp(x, y);

	return c ? c : x->i < y->i ? -1 : x->i > y->i;
}

int stfs_torch_dict_winners(const struct stfs_pk_val *d, size_t **out)
{
	size_t n = d->u.seq.count / 2, *win;
	struct kent *a;

	*out = NULL;
	a = malloc((n ? n : 1) * sizeof(*a));
	win = malloc((n ? n : 1) * sizeof(*win));
	if (!a || !win) {
		free(a);
		free(win);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		a[i] = (struct kent){d->u.seq.items[2 * i], i};
	qsort(a, n, sizeof(*a), kent_cmp);
	for (size_t s = 0, e; s < n; s = e) {
		for (e = s + 1; e < n && !key_cmp(&a[s], &a[e]); e++)
			win[a[e].i] = SIZE_MAX;   /* one key with a[s] */
		win[a[s].i] = a[e - 1].i;
	}
	free(a);
	*out = win;
	return 0;
}

/* f as Python's repr() writes it: the shortest digits that read back,
 * fixed-point when the decimal point is within 16 digits, else with an
 * exponent of at least two digits. */
static size_t float_repr(double f, char *buf, size_t bn)
{
	char e[48], dig[24], *c;
	int nd = 0, x, pt, p;
	size_t o = 0;

	if (isinf(f))
		return (size_t)snprintf(buf, bn, "%s", f < 0 ? "-inf" : "inf");
	if (f == 0)
		return (size_t)snprintf(buf, bn, "%s", signbit(f) ? "-0.0"
								  : "0.0");
	for (p = 1; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, f);
		if (strtod(e, NULL) == f)
			break;
	}
	snprintf(e, sizeof(e), "%.*e", p - 1, f);
	for (c = e + (f < 0); *c != 'e'; c++)
		if (*c != '.')
			dig[nd++] = *c;
	x = atoi(c + 1);
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	pt = x + 1;                     /* digits before the point */
#define PUT(ch) do { if (o + 1 < bn) buf[o] = (ch); o++; } while (0)
	if (f < 0)
		PUT('-');
	if (pt > -4 && pt <= 0) {          /* 0.000ddd */
		PUT('0');
		PUT('.');
		for (int i = pt; i < 0; i++)
			PUT('0');
		for (int i = 0; i < nd; i++)
			PUT(dig[i]);
	} else if (pt > 0 && pt <= 16) {   /* ddd.ddd, ddd00.0 */
		for (int i = 0; i < nd || i < pt; i++) {
			if (i == pt)
				PUT('.');
			PUT(i < nd ? dig[i] : '0');
		}
		if (nd <= pt) {
			PUT('.');
			PUT('0');
		}
	} else {
		PUT(dig[0]);
		if (nd > 1)
			PUT('.');
		for (int i = 1; i < nd; i++)
			PUT(dig[i]);
		snprintf(e, sizeof(e), "e%+03d", x);
		for (c = e; *c; c++)
			PUT(*c);
	}
#undef PUT
	if (bn)
		buf[o < bn ? o : bn - 1] = '\0';
	return o < bn ? o : bn - 1;
}

int stfs_torch_key_seg(const struct stfs_pk_val *k, char *buf, size_t bn,
		       const char **s, size_t *n, const char **why)
{
	*why = NULL;
	switch (kclass(k)) {
	case KC_STR:
		*s = k->u.str.s;
		*n = k->u.str.n;
		return 0;
	case KC_NONE:
		*n = (size_t)snprintf(buf, bn, "None");
		break;
	case KC_NUM:
		if (k->kind == STFS_PK_FLOAT)
			*n = float_repr(k->u.f, buf, bn);
		else if (k->kind == STFS_PK_BOOL)
			*n = (size_t)snprintf(buf, bn, "%s",
					      k->u.i ? "True" : "False");
		else
			*n = (size_t)snprintf(buf, bn, "%" PRId64, k->u.i);
		break;
	default:
		*why = k->kind == STFS_PK_FLOAT ? "a float NaN" :
		       k->kind == STFS_PK_INT ? "an int past 64 bits" :
		       k->kind == STFS_PK_TUPLE ? "a tuple" :
		       k->kind == STFS_PK_BYTES ? "bytes" :
		       "not a string, a number, a boolean or None";
		return 1;
	}
	*s = buf;
	return 0;
}
