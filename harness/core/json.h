/*
 * json.h: a string written as a JSON string literal (quotes, backslashes and control
 * characters escaped), for the writers of JSON output (case/json.c, cli/ops.c).
 */
#ifndef AMPSCOPE_JSON_H
#define AMPSCOPE_JSON_H

#include <stdio.h>

static inline void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

#endif
