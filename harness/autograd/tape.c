/*
 * tape.c: the autograd tape (see run.h): recording nodes in forward, replaying them in
 * reverse, and handing gradients to producers or to parameters' .grad, summing them where a
 * tensor receives several. While a node's backward runs, r->backward_op names it, so its
 * failures say which op failed.
 *
 * The sums are autograd's: a non-leaf tensor's gradients meet in its InputBuffer
 * (torch/csrc/autograd/input_buffer.cpp, InputBuffer::accumulate: `old_var + var`, or
 * in place when the buffer holds the only reference), a parameter's in AccumulateGrad
 * (torch/csrc/autograd/functions/accumulate_grad.h: `variable_grad += new_grad` under
 * no_grad). Both add in the gradient's dtype (the engine casts each gradient to its
 * input's dtype first, validate_outputs in engine.cpp): a float16 residual's gradient is
 * rounded to float16 at each sum, and the sum is observed as "<x>.grad".
 */
#include <stdio.h>
#include <string.h>

#include "run.h"

/* the slot of parameter t among the tape's leaves (added when new) */
static int leaf_slot(run *r, tensor *t)
{
    for (int i = 0; i < r->n_leaves; i++)
        if (r->leaf[i] == t)
            return i;
    if (r->n_leaves == RUN_MAX_CACHE)
        run_fail(r, "more than %d parameters read in one step", RUN_MAX_CACHE);
    r->leaf[r->n_leaves] = t;
    r->leaf_uses[r->n_leaves] = r->leaf_arrived[r->n_leaves] = 0;
    return r->n_leaves++;
}

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
            r->leaf_uses[leaf_slot(r, in[i])]++;
        } else if (in[i]->requires_grad) {
            r->nodes[in[i]->grad_fn].uses++;
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

/* the uses and arrivals of the tensor node n reads as input i */
static void grad_counts(const run *r, const node *n, int i, int *uses, int *arrived)
{
    if (n->leaf[i]) {
        for (int k = 0; k < r->n_leaves; k++)
            if (r->leaf[k] == n->leaf[i]) {
                *uses = r->leaf_uses[k];
                *arrived = r->leaf_arrived[k];
                return;
            }
        *uses = 1, *arrived = 0;
        return;
    }
    const node *p = &r->nodes[n->in[i].grad_fn];
    *uses = p->uses;
    *arrived = p->arrived;
}

void node_grad_name(const run *r, const node *n, int i, char *buf, size_t len)
{
    int uses, arrived;
    grad_counts(r, n, i, &uses, &arrived);
    if (uses > 1)
        snprintf(buf, len, "%s.grad_%d", n->in[i].name, arrived + 1);
    else
        snprintf(buf, len, "%s.grad", n->in[i].name);
}

tensor *node_grad_tensor(run *r, const node *n, int i)
{
    char name[TENSOR_NAME_MAX + 8];
    node_grad_name(r, n, i, name, sizeof name);
    return run_tensor_like(r, &n->in[i], name, n->in[i].dtype, MEM_GRADS);
}

/* *held += g, as autograd sums a tensor's gradients: in place when *held is the only
 * reference to its storage, else into a new tensor; rounded into the dtype, observed. */
static void accumulate(run *r, tensor **held, tensor *g, const char *name, tensor_role role)
{
    tensor *old = *held;
    if (g->dtype != old->dtype)
        run_fail(r, "%s: gradients of dtypes %s and %s cannot be summed", name,
                 dtype_name(old->dtype), dtype_name(g->dtype));
    bool steal = old->refs == 1 && !old->base;
    tensor *sum = steal ? old : run_tensor_like(r, old, name, old->dtype, MEM_GRADS);
    sum->why = old->why; /* the sum of a tensor's gradients, in its dtype */
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    const tensor *terms[2] = {old, g};
    run_check(r, r->be->pointwise_forward(r->be, PW_OP_add, &(op_params){0}, terms, sum, stp));
    snprintf(sum->name, sizeof sum->name, "%s", name);
    observe_tensor(r->obs, sum, role, stp);
    if (!steal)
        tensor_release(&r->pool, old);
    tensor_release(&r->pool, g);
    *held = sum;
}

static tensor_role grad_role(const tensor *t)
{
    return t->is_leaf ? ROLE_GRAD_PARAM : t->is_cast ? ROLE_GRAD_CAST : ROLE_GRAD_ACTIVATION;
}

void node_give_grad(run *r, node *n, int i, tensor *g, round_stats *st)
{
    tensor_role role = grad_role(&n->in[i]);
    const tensor *of = &n->in[i]; /* the engine's validate_outputs: in of's dtype */
    tensor_why(g, DTYPE_REASON_GRAD, n->op, &of, 1);
    observe_tensor(r->obs, g, role, st);
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", n->in[i].name);
    if (n->leaf[i]) { /* AccumulateGrad: .grad was None (zero_grad(set_to_none=True)) */
        tensor *p = n->leaf[i];
        r->leaf_arrived[leaf_slot(r, p)]++;
        if (p->grad)
            accumulate(r, &p->grad, g, name, role);
        else
            p->grad = g;
        return;
    }
    node *producer = &r->nodes[n->in[i].grad_fn];
    producer->arrived++;
    if (producer->grad)
        accumulate(r, &producer->grad, g, name, role);
    else
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

/* A node the root does not reach (an output nothing downstream reads) hands no gradient
 * on: its inputs count one use less, so a tensor's single gradient keeps the name
 * "<x>.grad". Nodes are in the order made, so one sweep down from the last sees every
 * consumer of a node before the node. */
static void discount_unreached(run *r, int root)
{
    bool reached[RUN_MAX_NODES] = {false};
    reached[root] = true;
    for (int k = r->n_nodes - 1; k >= 0; k--) {
        const node *n = &r->nodes[k];
        for (int i = 0; i < n->n_in; i++) {
            if (!n->in[i].requires_grad)
                continue;
            if (reached[k] && !n->leaf[i])
                reached[n->in[i].grad_fn] = true;
            else if (!reached[k] && n->leaf[i])
                r->leaf_uses[leaf_slot(r, n->leaf[i])]--;
            else if (!reached[k])
                r->nodes[n->in[i].grad_fn].uses--;
        }
    }
}

void tape_backward(run *r, tensor *root, float seed)
{
    if (root->grad_fn < 0)
        run_fail(r, "element 0 of tensors does not require grad and does not have a grad_fn");
    node *last = &r->nodes[root->grad_fn];
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", root->name);
    tensor *g = run_tensor_like(r, root, name, root->dtype, MEM_GRADS);
    const tensor *of = root;
    tensor_why(g, DTYPE_REASON_GRAD, "ones_like", &of, 1);
    run_check(r, r->be->fill(r->be, g, seed)); /* torch.ones_like(loss) */
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, g, stp));
    observe_tensor(r->obs, g, ROLE_GRAD_ACTIVATION, stp);
    last->grad = g;
    discount_unreached(r, root->grad_fn);
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
    r->n_leaves = 0;
}

void tape_clear(run *r)
{
    for (int k = 0; k < r->n_nodes; k++)
        node_clear(r, &r->nodes[k]);
    r->n_nodes = 0;
    r->n_leaves = 0;
}

int64_t tape_saved_bytes_by_dtype(const run *r, int64_t by_dtype[DTYPE_COUNT])
{
    for (int d = 0; d < DTYPE_COUNT; d++)
        by_dtype[d] = 0;
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
                by_dtype[t->dtype] += tensor_bytes(t);
            }
        }
    return bytes;
}
