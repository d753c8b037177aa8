/*
 * suites.h: the Check suites of the unit tests, one per area.
 */
#ifndef STFS_TEST_SUITES_H
#define STFS_TEST_SUITES_H

#include <check.h>

Suite *header_suite(void);
Suite *dtype_suite(void);
Suite *file_suite(void);
Suite *names_suite(void);
Suite *views_suite(void);
Suite *model_suite(void);
Suite *remote_suite(void);
Suite *answers_suite(void);
Suite *resolve_suite(void);
Suite *table_suite(void);
Suite *s3xml_suite(void);
Suite *s3sum_suite(void);
Suite *torch_suite(void);
Suite *repo_suite(void);
Suite *cache_suite(void);
Suite *creds_suite(void);
Suite *trust_suite(void);

#endif
