/*
 * import.c: `ampscope import`: the importer is Python (it needs torch.export), so this
 * command finds it, tools/import_model.py next to the binary's bin/ folder, and replaces the
 * process with the interpreter running it on the same arguments. The importer checks its own
 * arguments, says when torch cannot be imported, and exits 2 on any bad input.
 */
#include "import.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int import_exec(int argc, char **argv)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        fprintf(stderr, "ampscope: import: cannot find the binary's folder: %s\n",
                strerror(errno));
        return 2;
    }
    exe[n] = '\0';
    char script[PATH_MAX + 64];
    snprintf(script, sizeof script, "%s/../tools/import_model.py", dirname(exe));
    if (access(script, R_OK) != 0) {
        fprintf(stderr, "ampscope: import: the importer %s is missing: %s\n", script,
                strerror(errno));
        return 2;
    }
    const char *python = getenv("AMPSCOPE_PYTHON");
    if (!python || !*python)
        python = "python3";
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, "ampscope: import: out of memory\n");
        return 2;
    }
    args[0] = (char *)python;
    args[1] = script;
    for (int i = 2; i < argc; i++)
        args[i] = argv[i];
    execvp(python, args);
    fprintf(stderr,
            "ampscope: import: cannot run the Python interpreter '%s': %s\n"
            "---> HINT: set AMPSCOPE_PYTHON to a python that can import torch\n",
            python, strerror(errno));
    free(args);
    return 2;
}
