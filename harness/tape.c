/*
 * tape.c: the autograd tape (see run.h): recording nodes in forward, replaying them in
 * reverse, and handing gradients to producers or to parameters' .grad. While a node's
 * backward runs, r->backward_op names it, so its failures say which op failed.
 */
#include <stdio.h>
#include <string.h>

#include "run.h"

node *tape_record(run *r, const char *op, backward_fn backward, tensor *out, tensor *const *in,
                  int n_in)
{
    bool any = false;
    for (int i = 0; i < n_in; i++)
        any |= in[i] && in[i]->requires_grad;
    if (!any)
        return NULL;
    if (r->n_nodes == RUN_MAX_NODES)
        run_fail(r, "the model has more than %d autograd nodes", RUN_MAX_NODES);
    node *n = &r->nodes[r->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->backward = backward;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        if (!in[i])
            continue;
        n->in[i] = *in[i];
        n->in[i].data = NULL;
        if (in[i]->is_leaf) {
            n->leaf[i] = in[i];
            tensor_retain(in[i]);
        }
    }
    out->requires_grad = true;
    out->grad_fn = r->n_nodes++;
    n->out = *out;
    n->out.data = NULL;
    return n;
}

void tape_save(node *n, int i, tensor *t)
{
    if (!n)
        return;
    tensor_retain(t);
    n->saved[i] = t;
}

bool node_needs_grad(const node *n, int i) { return i < n->n_in && n->in[i].requires_grad; }

tensor *node_grad_tensor(run *r, const node *n, int i)
{
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", n->in[i].name);
    return run_tensor_like(r, &n->in[i], name, n->in[i].dtype, MEM_GRADS);
}

static tensor_role grad_role(const tensor *t)
{
    return t->is_leaf ? ROLE_GRAD_PARAM : t->is_cast ? ROLE_GRAD_CAST : ROLE_GRAD_ACTIVATION;
}

void node_give_grad(run *r, node *n, int i, tensor *g, round_stats *st)
{
    observe_tensor(r->obs, g, grad_role(&n->in[i]), st);
    if (n->leaf[i]) { /* AccumulateGrad: .grad was None (zero_grad(set_to_none=True)) */
        tensor *p = n->leaf[i];
        if (p->grad)
            run_fail(r, "%s is used twice in one step; gradient accumulation is not supported",
                     p->name);
        p->grad = g;
        return;
    }
    node *producer = &r->nodes[n->in[i].grad_fn];
    if (producer->grad)
        run_fail(r, "%s is used twice in one step; gradient accumulation is not supported",
                 n->in[i].name);
    producer->grad = g;
}

static void node_clear(run *r, node *n)
{
    for (int i = 0; i < NODE_MAX_INPUTS; i++) {
        tensor_release(&r->pool, n->saved[i]);
        tensor_release(&r->pool, n->leaf[i]);
        n->saved[i] = n->leaf[i] = NULL;
    }
    tensor_release(&r->pool, n->grad);
    n->grad = NULL;
}

void tape_backward(run *r, tensor *root, float seed)
{
    if (root->grad_fn < 0)
        run_fail(r, "element 0 of tensors does not require grad and does not have a grad_fn");
    node *last = &r->nodes[root->grad_fn];
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", root->name);
    tensor *g = run_tensor_like(r, root, name, root->dtype, MEM_GRADS);
    run_check(r, r->be->fill(r->be, g, seed)); /* torch.ones_like(loss) */
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, g, stp));
    observe_tensor(r->obs, g, ROLE_GRAD_ACTIVATION, stp);
    last->grad = g;
    for (int k = root->grad_fn; k >= 0; k--) {
        node *n = &r->nodes[k];
        if (n->grad) {
            r->backward_op = n->op;
            n->backward(r, n);
            r->backward_op = NULL;
        }
        node_clear(r, n);
    }
    r->n_nodes = 0;
}

void tape_clear(run *r)
{
    for (int k = 0; k < r->n_nodes; k++)
        node_clear(r, &r->nodes[k]);
    r->n_nodes = 0;
}

int64_t tape_saved_bytes(const run *r)
{
    const tensor *seen[RUN_MAX_NODES * NODE_MAX_INPUTS];
    int n_seen = 0;
    int64_t bytes = 0;
    for (int k = 0; k < r->n_nodes; k++)
        for (int i = 0; i < NODE_MAX_INPUTS; i++) {
            const tensor *t = r->nodes[k].saved[i];
            if (!t)
                continue;
            while (t->base)
                t = t->base;
            if (t->category == MEM_PARAMS || t->category == MEM_AUTOCAST_CACHE)
                continue;
            bool dup = false;
            for (int j = 0; j < n_seen && !dup; j++)
                dup = seen[j] == t;
            if (!dup) {
                seen[n_seen++] = t;
                bytes += tensor_bytes(t);
            }
        }
    return bytes;
}
