/*
 * libenv.h: the environment OpenMP and OpenBLAS must see when they load (see libenv.c).
 */
#ifndef AMPSCOPE_LIBENV_H
#define AMPSCOPE_LIBENV_H

#include <stdbool.h>

/* Sets the variables this process needs and has not been given; true when it set one: the
 * libraries read them only when the program starts, so the caller starts it again (execv). */
bool libenv_prepare(void);

/* The GEMM kernels OpenBLAS runs, as it names them ("SkylakeX", "Haswell", ...). */
const char *libenv_blas_core(void);

#endif
