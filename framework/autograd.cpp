#include "gat/framework/autograd.h"

#include <unordered_map>
#include <unordered_set>

#include "gat/framework/ops/add_into.h"

namespace gat::autograd {

namespace {
thread_local bool g_grad_enabled = true;
}

bool grad_enabled() { return g_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(const char* op, Tensor out, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!needs_grad(inputs)) return out;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  out.impl().requires_grad = true;
  out.impl().grad_fn = std::move(node);
  return out;
}

namespace {

// Tensors reachable from root through grad_fn edges, in reverse topological order
// (every tensor before the inputs of the op that produced it). The list owns the tensors: the
// walk frees each node's inputs after running it, which may drop the last other reference to an
// intermediate tensor still waiting in the list.
std::vector<std::shared_ptr<TensorImpl>> reverse_topological_order(const std::shared_ptr<TensorImpl>& root) {
  std::vector<std::shared_ptr<TensorImpl>> post_order;
  std::unordered_set<TensorImpl*> visited{root.get()};
  // Iterative DFS: (tensor, index of the next input to visit).
  std::vector<std::pair<std::shared_ptr<TensorImpl>, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    const Node* node = t->grad_fn.get();
    if (node && next < node->inputs.size()) {
      std::shared_ptr<TensorImpl> in = node->inputs[next++].impl_ptr();
      if (in && in->requires_grad && visited.insert(in.get()).second) stack.push_back({std::move(in), 0});
      continue;
    }
    post_order.push_back(t);
    stack.pop_back();
  }
  return {post_order.rbegin(), post_order.rend()};
}

void check_gradient(const Node& node, const Tensor& input, const Tensor& grad) {
  GAT_CHECK(grad.shape() == input.shape() && grad.dtype() == input.dtype() &&
                grad.device() == input.device(),
            "autograd: backward of '", node.op, "' gave a gradient ", grad.describe(),
            " for an input ", input.describe());
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_root) {
  GAT_CHECK(root.requires_grad(), "backward: the tensor ", root.describe(),
            " does not require grad (no input of its computation requires grad)");
  Tensor seed = grad_root;
  if (!seed.defined()) {
    GAT_CHECK(root.numel() == 1, "backward: a gradient must be given for a non-scalar root ",
              root.describe());
    seed = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  check_shape("backward", "grad_root", seed, root.shape());

  // Gradients that flowed into non-leaf tensors and wait for their node to run. `owned`: no
  // other tensor shares the gradient's storage, so sums may go into it in place.
  struct Pending {
    Tensor grad;
    bool owned;
  };
  std::unordered_map<TensorImpl*, Pending> pending{{root.impl_ptr().get(), {seed, false}}};
  // A gradient that nothing else holds (a backward closure's fresh output) is kept as it is;
  // any other is copied first, as it may alias another tensor (the caller's, another input's).
  auto deliver = [&](const std::shared_ptr<TensorImpl>& target, const Tensor& g, bool unshared) {
    if (target->grad_fn) {  // non-leaf: sum the contributions of every use
      auto [it, inserted] = pending.try_emplace(target.get(), Pending{g, unshared});
      if (!inserted) {
        Pending& sum = it->second;
        if (!sum.owned) sum = {sum.grad.clone(), true};
        ops::add_into(sum.grad, g);
      }
    } else if (target->grad) {  // leaf with a gradient already: accumulate in place
      Tensor acc(target->grad);
      ops::add_into(acc, g);
    } else {
      target->grad = unshared ? g.impl_ptr() : g.clone().impl_ptr();
    }
  };

  for (const std::shared_ptr<TensorImpl>& owned : reverse_topological_order(root.impl_ptr())) {
    TensorImpl* t = owned.get();
    if (!t->grad_fn) {  // a leaf reached from the root: the root itself when it is a leaf
      if (t == root.impl_ptr().get()) deliver(root.impl_ptr(), seed, false);
      continue;
    }
    auto it = pending.find(t);
    if (it == pending.end()) continue;  // reachable, but no gradient flowed into it
    Tensor grad_out = std::move(it->second.grad);
    pending.erase(it);
    Node& node = *t->grad_fn;
    GAT_CHECK(node.backward, "backward: the graph through '", node.op,
              "' was already back-propagated (its saved tensors are freed)");
    std::vector<Tensor> grads = node.backward(grad_out);
    GAT_CHECK(grads.size() == node.inputs.size(), "autograd: backward of '", node.op, "' gave ",
              grads.size(), " gradients for ", node.inputs.size(), " inputs");
    // Released first, so that what they held does not count as another holder of a gradient.
    const std::vector<Tensor> inputs = std::move(node.inputs);
    node.backward = nullptr;  // frees the saved tensors and the rest of the tape
    node.inputs.clear();
    grad_out = Tensor();
    std::vector<bool> unshared(grads.size());  // held by grads[i] alone, without history
    for (size_t i = 0; i < grads.size(); ++i)
      unshared[i] = grads[i].defined() && grads[i].impl_ptr().use_count() == 1 &&
                    grads[i].impl().storage.use_count() == 1 && !grads[i].requires_grad();
    for (size_t i = 0; i < grads.size(); ++i) {
      const Tensor& input = inputs[i];
      if (!input.defined() || !input.requires_grad() || !grads[i].defined()) continue;
      check_gradient(node, input, grads[i]);
      deliver(input.impl_ptr(), grads[i], unshared[i]);
    }
  }
}

}  // namespace gat::autograd
