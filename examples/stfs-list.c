/*
 * stfs-list.c: a small program built against the installed libstfs that
 * lists a model's tensors: one line per tensor, "NAME DTYPE SHAPE BYTES
 * FILE".  Build it with
 *   cc stfs-list.c $(pkg-config --cflags --libs stfs) -o stfs-list
 * The test suite builds it this way, shared and static, and compares its
 * output with `stfs inspect --json`.
 */
#include <stdio.h>
#include <stdlib.h>

#include <stfs/stfs.h>

int main(int argc, char **argv)
{
	struct stfs_model *m;
	struct stfs_error err;

	if (argc != 2) {
		fprintf(stderr, "usage: stfs-list FILE|DIR|INDEX\n");
		return 2;
	}
	if (stfs_model_open(argv[1], 0, NULL, NULL, &m, &err) < 0) {
		fprintf(stderr, "stfs-list: %s: %s\n", argv[1], err.msg);
		return 1;
	}
	for (size_t i = 0; i < stfs_model_tensor_count(m); i++) {
		const struct stfs_tensor *t = stfs_model_tensor(m, i);
		char name[4096], shape[4096];

		stfs_quote(t->name, t->name_len, name, sizeof(name));
		stfs_shape_str(t, shape, sizeof(shape));
		printf("%s %s %s %llu %s\n", name, stfs_dtype_name(t->dtype),
		       shape, (unsigned long long)(t->end - t->begin),
		       stfs_model_file_name(m, stfs_model_tensor_file(m, i)));
	}
	stfs_model_close(m);
	return 0;
}
