/*
 * expect.h: a case's [expect] held against its run, once the run has ended: each `dtype
 * TENSOR` against the dtypes the record saw, each `saturated OPERAND` against the record's
 * float8 quantizations of that operand (any with saturated > 0: yes), each `error` against
 * the run's error. Each line is a row of the record (expect.csv), and the result's
 * expect_passed, expect_total, passed and failures are made from them
 * (record_expect_result).
 */
#ifndef AMPSCOPE_EXPECT_H
#define AMPSCOPE_EXPECT_H

#include "config/case.h"
#include "record/record.h"

void expect_check(const case_config *cfg, run_record *rec);

#endif
