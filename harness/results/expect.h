/*
 * expect.h: a case's [expect] held against its run, once the run has ended: each `dtype
 * TENSOR` against the dtypes the observer saw, each `saturated OPERAND` against the rows of
 * the case folder's fp8.csv (any row of that operand with saturated > 0: yes), each `error`
 * against the run's error. Fills res's expect_passed, expect_total, passed and failures
 * ("<case file>:<line>: expectation failed: ..." one per line).
 */
#ifndef AMPSCOPE_EXPECT_H
#define AMPSCOPE_EXPECT_H

#include "autograd/observe.h"
#include "train/train.h"

/* dir: the case's results folder, whose fp8.csv (written in full: flushed) the saturated
 * expectations read */
void expect_check(const case_config *cfg, const observer *obs, const char *dir, case_result *res);

#endif
