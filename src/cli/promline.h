/*
 * promline.h: one line of the Prometheus text format as a mount's daemon
 * writes it (docs/metrics.md), read strictly (promline.c): what `stfs
 * stats` reads from a mount's user.stfs.metrics xattr, which any FUSE
 * filesystem could answer with any bytes.  No FUSE and no libstfs in it,
 * so tests/fuzz/fuzz_promline.c links it alone.
 */
#ifndef STFS_PROMLINE_H
#define STFS_PROMLINE_H

#define STFS_PROM_LABELS 4

/* A series: its name, labels and value, pointing into the line. */
struct stfs_prom_series {
	const char *name;
	unsigned nlabels;
	const char *label[STFS_PROM_LABELS], *value_of[STFS_PROM_LABELS];
	const char *value;
	double v;
};

/* Read line (NUL terminated, no newline; changed in place): 0 with *s, a
 * series; 1 for a comment or a blank line; -EINVAL for anything else.  A
 * name is [a-zA-Z_:][a-zA-Z0-9_:]*, a label's name [a-zA-Z_][a-zA-Z0-9_]*,
 * its value printable ASCII without '"' or '\', at most STFS_PROM_LABELS
 * of them; the value a number strtod() reads whole (or +Inf, -Inf,
 * NaN). */
int stfs_prom_line(char *line, struct stfs_prom_series *s);

#endif
