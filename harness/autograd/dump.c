/* dump.c: tensors as .npy files (see dump.h). */
#include "dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/npy.h"

/* mkdir -p */
static int make_dir(const char *path, char *err, int errlen)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) && errno != EEXIST) {
            snprintf(err, (size_t)errlen, "cannot create %s: %s", p, strerror(errno));
            return -1;
        }
        *s = '/';
    }
    if (mkdir(p, 0777) && errno != EEXIST) {
        snprintf(err, (size_t)errlen, "cannot create %s: %s", p, strerror(errno));
        return -1;
    }
    return 0;
}

int dump_tensor(backend *be, const char *dir, const char *sub, const tensor *t, char *err,
                int errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    if (make_dir(dir, err, errlen) || make_dir(path, err, errlen))
        return -1;
    bool bf16 = t->dtype == DTYPE_BFLOAT16 || dtype_is_float8(t->dtype); /* widened */
    snprintf(path, sizeof path, "%s/%s/%s%s%s.npy", dir, sub, t->name, bf16 ? "." : "",
             bf16 ? dtype_name(t->dtype) : "");
    int64_t bytes = tensor_bytes(t);
    void *host = malloc(bytes ? (size_t)bytes : 1);
    float *wide = bf16 ? malloc(sizeof(float) * (size_t)(t->numel ? t->numel : 1)) : NULL;
    if (!host || (bf16 && !wide)) {
        free(host);
        free(wide);
        snprintf(err, (size_t)errlen, "out of host memory dumping %s", t->name);
        return -1;
    }
    be->download(be, host, t->data, bytes);
    if (bf16)
        for (int64_t i = 0; i < t->numel; i++)
            wide[i] = load_as_float(host, t->dtype, i);
    int rc = npy_write(path, bf16 ? DTYPE_FLOAT32 : t->dtype, t->ndim, t->shape,
                       bf16 ? (const void *)wide : host, err, errlen);
    free(host);
    free(wide);
    return rc;
}
