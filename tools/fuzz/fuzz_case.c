/*
 * fuzz_case.c: libFuzzer target for the case-file parser. Each input is written to a
 * memory file and loaded with case_load, as `ampscope check` would; the parser must return
 * (with or without errors) without crashing, leaking or invoking undefined behaviour.
 * Build and run: make fuzz FUZZ_SECONDS=N.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config/case.h"
#include "case/load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static case_config cfg;
    int fd = memfd_create("fuzz.case", 0);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    err_list errs = {0};
    case_load(path, NULL, 0, &cfg, &errs);
    if (errs.n == 0) { /* a valid case must also serialise */
        FILE *sink = fopen("/dev/null", "w");
        if (sink) {
            case_write_json(&cfg, sink);
            fclose(sink);
        }
    }
    err_list_free(&errs);
    close(fd);
    return 0;
}
