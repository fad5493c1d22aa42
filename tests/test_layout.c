/*
 * test_layout.c: the source tree's dependencies point one way. harness/README.md orders the
 * folders of harness/; a file may include headers of its own folder and of the folders
 * listed before its own, never of one listed after it (no cycles between folders), and no
 * file of harness/ includes a private header of a backend (ops/cpu/cpu.h outside ops/cpu/)
 * or anything of kernels/. The order is read from harness/README.md's table, so the test
 * and the document cannot disagree; the includes are read from the files themselves.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FOLDERS 32
#define FOLDER_MAX 64

typedef struct order {
    char folder[MAX_FOLDERS][FOLDER_MAX];
    int n;
} order;

/* harness/README.md's table rows "| `core/` | ...", "| `ops/cpu/` | ...", in their order */
static void read_order(order *o)
{
    FILE *f = fopen("harness/README.md", "r");
    cr_assert(f, "harness/README.md is missing");
    char line[1024];
    o->n = 0;
    while (fgets(line, sizeof line, f)) {
        char name[FOLDER_MAX];
        size_t len;
        if (sscanf(line, "| `%63[^`]` |", name) != 1 || (len = strlen(name)) < 2 ||
            name[len - 1] != '/')
            continue;
        name[len - 1] = '\0';
        cr_assert(o->n < MAX_FOLDERS);
        snprintf(o->folder[o->n++], FOLDER_MAX, "%s", name);
    }
    fclose(f);
    cr_assert(o->n >= 5, "harness/README.md's folder table has %d rows", o->n);
}

/* the position of folder `dir` (relative to harness/) in the order; -1 when not listed */
static int rank_of(const order *o, const char *dir)
{
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->folder[i], dir) == 0)
            return i;
    return -1;
}

typedef struct findings {
    char text[8192];
    int n;
} findings;

static void note(findings *fd, const char *fmt, const char *a, const char *b, const char *c)
{
    if (fd->n++ < 20) {
        size_t len = strlen(fd->text);
        snprintf(fd->text + len, sizeof fd->text - len, fmt, a, b, c);
    }
}

/* the folder of an include written in file `file` (in folder `dir`): "core/dtype.h" ->
 * "core"; a bare "x.h" is the file's own folder */
static void include_folder(const char *dir, const char *inc, char *out, size_t len)
{
    const char *slash = strrchr(inc, '/');
    if (!slash) {
        snprintf(out, len, "%s", dir);
        return;
    }
    snprintf(out, len, "%.*s", (int)(slash - inc), inc);
}

/* The folder a file of kernels/ is ranked as: its twin's, the folder of harness/ holding a
 * .c of its base name (kernels/nccl.c is distributed/nccl.c's library side), the CPU
 * backend's (ops/cpu) when that holds one or no folder does (cuda.cuh, backend_cuda.cu). */
static void kernel_twin_folder(const order *o, const char *file, char *out, size_t len)
{
    char base[256];
    snprintf(base, sizeof base, "%s", file);
    char *dot = strchr(base, '.');
    if (dot)
        *dot = '\0';
    snprintf(out, len, "ops/cpu");
    char path[512];
    snprintf(path, sizeof path, "harness/ops/cpu/%s.c", base);
    if (access(path, R_OK) == 0)
        return;
    for (int i = 0; i < o->n; i++) {
        snprintf(path, sizeof path, "harness/%s/%s.c", o->folder[i], base);
        if (access(path, R_OK) == 0) {
            snprintf(out, len, "%s", o->folder[i]);
            return;
        }
    }
}

/* dir: the file's folder under harness/, or "kernels" (ranked as its twin's folder) */
static void check_file(const order *o, const char *path, const char *dir, findings *fd)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    bool kernel = strcmp(dir, "kernels") == 0;
    char twin[FOLDER_MAX] = "";
    if (kernel)
        kernel_twin_folder(o, strrchr(path, '/') + 1, twin, sizeof twin);
    int own = rank_of(o, kernel ? twin : dir);
    if (own < 0)
        note(fd, "%s: its folder %s%s is not in harness/README.md's table\n", path, dir, "");
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char inc[512], folder[512];
        if (sscanf(line, " #include \"%511[^\"]\"", inc) != 1)
            continue;
        bool own_kernel_header = kernel && !strchr(inc, '/');
        if (own_kernel_header)
            continue;
        if (strncmp(inc, "../", 3) == 0 || strstr(inc, "kernels/")) {
            note(fd, "%s includes \"%s\"%s (a relative or kernels/ path)\n", path, inc, "");
            continue;
        }
        include_folder(dir, inc, folder, sizeof folder);
        if (strcmp(folder, "ops/cpu") == 0 && strcmp(dir, "ops/cpu") != 0) {
            note(fd, "%s includes \"%s\"%s, private to the CPU backend\n", path, inc, "");
            continue;
        }
        int r = rank_of(o, folder);
        if (r < 0)
            note(fd, "%s includes \"%s\" of folder %s, not in harness/README.md's table\n",
                 path, inc, folder);
        else if (own >= 0 && r > own)
            note(fd, "%s includes \"%s\": %s comes after its folder in harness/README.md\n",
                 path, inc, folder);
    }
    fclose(f);
}

static void walk(const order *o, const char *root, const char *rel, findings *fd, int *files)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    cr_assert(d, "cannot open %s", path);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char child_rel[512], child[1024];
        snprintf(child_rel, sizeof child_rel, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(child, sizeof child, "%s/%s", root, child_rel);
        struct stat st;
        if (stat(child, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(o, root, child_rel, fd, files);
            continue;
        }
        size_t len = strlen(e->d_name);
        bool source = (len > 2 && (strcmp(e->d_name + len - 2, ".c") == 0 ||
                                   strcmp(e->d_name + len - 2, ".h") == 0)) ||
                      (len > 3 && strcmp(e->d_name + len - 3, ".cu") == 0) ||
                      (len > 4 && strcmp(e->d_name + len - 4, ".cuh") == 0);
        if (source && *rel) {
            check_file(o, child, rel, fd);
            (*files)++;
        }
    }
    closedir(d);
}

/* kernels/: the CUDA backend, ranked as the CPU backend it twins */
static void walk_kernels(const order *o, findings *fd)
{
    DIR *d = opendir("kernels");
    cr_assert(d, "cannot open kernels/");
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 3)
            continue;
        char path[512];
        snprintf(path, sizeof path, "kernels/%s", e->d_name);
        check_file(o, path, "kernels", fd);
    }
    closedir(d);
}

Test(layout, harness_folders_include_only_the_folders_before_them)
{
    order o;
    read_order(&o);
    findings fd = {.n = 0};
    fd.text[0] = '\0';
    int files = 0;
    walk(&o, "harness", "", &fd, &files);
    cr_assert_gt(files, 50, "only %d source files found under harness/", files);
    walk_kernels(&o, &fd);
    cr_expect_eq(fd.n, 0, "%d includes point the wrong way:\n%s", fd.n, fd.text);
}

/* The check itself: a file that includes a folder listed after its own is caught. */
Test(layout, an_include_of_a_later_folder_is_caught)
{
    order o;
    read_order(&o);
    cr_assert(rank_of(&o, "core") >= 0 && rank_of(&o, "cli") > rank_of(&o, "core"),
              "harness/README.md must list core/ before cli/");
    char dir[] = "/tmp/ampscope-layout-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof path, "%s/bad.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("#include \"cli/sweep.h\"\n#include \"ops/cpu/cpu.h\"\n#include \"core/dtype.h\"\n", f);
    fclose(f);
    findings fd = {.n = 0};
    fd.text[0] = '\0';
    check_file(&o, path, "core", &fd);
    cr_expect_eq(fd.n, 2, "expected 2 findings, got %d:\n%s", fd.n, fd.text);
    remove(path);
    rmdir(dir);
}
