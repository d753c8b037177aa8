/*
 * check_main.c: runs every unit-test suite; exit status 0 only if all pass.
 */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(header_suite());
	int failed;

	srunner_add_suite(sr, dtype_suite());
	srunner_add_suite(sr, file_suite());
	srunner_add_suite(sr, names_suite());
	srunner_add_suite(sr, views_suite());
	srunner_add_suite(sr, model_suite());
	srunner_add_suite(sr, remote_suite());
	srunner_add_suite(sr, answers_suite());
	srunner_add_suite(sr, resolve_suite());
	srunner_add_suite(sr, table_suite());
	srunner_add_suite(sr, repo_suite());
	srunner_add_suite(sr, s3xml_suite());
	srunner_add_suite(sr, s3sum_suite());
	srunner_add_suite(sr, torch_suite());
	srunner_add_suite(sr, cache_suite());
	srunner_add_suite(sr, creds_suite());
	srunner_add_suite(sr, trust_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
