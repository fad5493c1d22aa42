/* dtype_reason.c: the words of dtype_reason.h's reasons, and tensor_why() (tensor.h). */
#include "dtype_reason.h"

#include <stdio.h>
#include <string.h>

#include "tensor.h"

#define DTYPE_REASON_WORD(id, word) [id] = word,
static const char *const words[DTYPE_REASON_COUNT] = {DTYPE_REASONS(DTYPE_REASON_WORD)};
#undef DTYPE_REASON_WORD

const char *dtype_reason_name(dtype_reason r)
{
    return r >= 0 && r < DTYPE_REASON_COUNT ? words[r] : "";
}

bool dtype_reason_parse(const char *s, dtype_reason *r)
{
    for (int i = 0; i < DTYPE_REASON_COUNT; i++)
        if (strcmp(s, words[i]) == 0) {
            *r = (dtype_reason)i;
            return true;
        }
    return false;
}

void tensor_why(tensor *t, dtype_reason reason, const char *op, const tensor *const *from,
                int n_from)
{
    t->why.reason = reason;
    t->why.op = op;
    int off = 0;
    t->why.from[0] = '\0';
    for (int i = 0; i < n_from; i++) {
        if (!from[i])
            continue;
        int n = snprintf(t->why.from + off, sizeof t->why.from - (size_t)off, "%s%s",
                         off ? "|" : "", from[i]->name);
        if (n < 0 || off + n >= (int)sizeof t->why.from)
            break; /* cut where it no longer fits */
        off += n;
    }
}
