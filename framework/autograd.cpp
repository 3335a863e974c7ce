#include "gat/framework/autograd.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "gat/framework/ops/add_into.h"

namespace gat::autograd {

namespace {
thread_local bool g_grad_enabled = true;
thread_local SideWork* t_side = nullptr;       // the running backward pass's side work
thread_local const Node* t_running = nullptr;  // the node whose backward closure runs

// A handle to t's data that is not checked as a saved tensor: gradients travel through the pass
// as these, whatever handle they came as (a closure may return what it saved; the caller may give
// a detached grad_root), so that summing into them in place is not taken for a modification.
Tensor unchecked(Tensor t) {
  if (!t.defined() || t.impl().saved_version < 0) return t;
  Tensor out = t.alias();
  out.impl().saved_version = -1;
  return out;
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }

bool in_backward() { return t_running != nullptr; }

void check_saved(const Tensor& t, uint64_t saved_version) {
  if (!t_running) return;
  const Node& node = *t_running;
  const Storage* data = t.impl().storage.get();
  std::string which = "a tensor it saved";
  if (data == node.output_storage) which = "its output";
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (data == node.inputs[i].storage)
      which = "its input " + std::to_string(i + 1) + " of " + std::to_string(node.inputs.size());
  GAT_FAIL("backward of ", node.op, ": ", which, " (", t.describe(),
           ") was modified in place after the forward pass (version ", t.impl().storage->version(),
           ", saved at ", saved_version,
           "); its gradient needs the values the forward pass used: run the forward pass again after the "
           "change, or modify a clone()");
}

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Tensor record(const char* op, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward) {
  if (!needs_grad(inputs)) return out;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->inputs.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    Edge edge;
    if (in.defined()) {
      if (in.impl().grad_fn)
        edge.producer = in.impl().grad_fn;
      else if (in.requires_grad())
        edge.leaf = in.impl_ptr();
      edge.shape = in.shape(), edge.dtype = in.dtype(), edge.device = in.device();
      edge.storage = in.impl().storage.get();
    }
    node->inputs.push_back(std::move(edge));
  }
  node->backward = std::move(backward);
  node->output_storage = out.impl().storage.get();
  out.impl().requires_grad = true;
  out.impl().grad_fn = std::move(node);
  return out;
}

namespace {

// The Nodes reachable from root through their edges, in reverse topological order (every node
// before the producers of its inputs). The list owns the nodes for the length of the walk.
std::vector<std::shared_ptr<Node>> reverse_topological_order(const std::shared_ptr<Node>& root) {
  std::vector<std::shared_ptr<Node>> post_order;
  std::unordered_set<Node*> visited{root.get()};
  // Iterative DFS: (node, index of the next input to visit).
  std::vector<std::pair<std::shared_ptr<Node>, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      std::shared_ptr<Node> producer = node->inputs[next++].producer;
      if (producer && visited.insert(producer.get()).second) stack.emplace_back(std::move(producer), 0);
      continue;
    }
    post_order.push_back(node);
    stack.pop_back();
  }
  return {post_order.rbegin(), post_order.rend()};
}

void check_gradient(const Node& node, const Edge& input, const Tensor& grad) {
  GAT_CHECK(grad.shape() == input.shape && grad.dtype() == input.dtype && grad.device() == input.device,
            "autograd: backward of '", node.op, "' gave a gradient ", grad.describe(), " for an input ",
            describe_tensor(input.dtype, input.device, input.shape));
}

}  // namespace

std::vector<Tensor> side_gradients(const std::vector<Tensor>& inputs, const SideWork::Fn& work) {
  if (!t_side) return work(inputs);
  return t_side->run(inputs, work);
}

void backward(const Tensor& root, Tensor grad_root) {
  GAT_CHECK(root.requires_grad(), "backward: the tensor ", root.describe(),
            " does not require grad (no input of its computation requires grad)");
  Tensor seed = unchecked(std::move(grad_root));
  if (!seed.defined()) {
    GAT_CHECK(root.numel() == 1, "backward: a gradient must be given for a non-scalar root ",
              root.describe());
    seed = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  check_shape("backward", "grad_root", seed, root.shape());

  // A gradient that nothing else holds (a backward closure's fresh output) is kept as it is;
  // any other is copied first, as it may alias another tensor (the caller's, another input's).
  auto deliver_to_leaf = [](TensorImpl& leaf, const Tensor& g, bool unshared) {
    if (leaf.grad) {  // a gradient already: accumulate in place
      Tensor acc(leaf.grad);
      ops::add_into(acc, g);
    } else {
      leaf.grad = unshared ? g.impl_ptr() : g.clone().impl_ptr();
    }
  };
  const std::shared_ptr<Node>& root_node = root.impl().grad_fn;
  if (!root_node) {  // the root is a leaf
    deliver_to_leaf(root.impl(), seed, false);
    return;
  }

  // Gradients that flowed into intermediate tensors, by the node that produced them, waiting for
  // it to run. `owned`: no other tensor shares the gradient's storage, so sums may go into it in
  // place.
  struct Pending {
    Tensor grad;
    bool owned;
  };
  std::unordered_map<Node*, Pending> pending{{root_node.get(), {std::move(seed), false}}};
  // The pass's side work: joined before a gradient it made is read on the main stream, and at
  // the end (the destructor, also when a closure throws).
  SideWork side;
  struct SideScope {
    SideWork* previous;
    explicit SideScope(SideWork* side) : previous(t_side) { t_side = side; }
    ~SideScope() { t_side = previous; }
  } side_scope(&side);
  auto deliver = [&](const Edge& target, const Tensor& g, bool unshared) {
    if (target.producer) {  // an intermediate tensor: sum the contributions of every use
      auto [it, inserted] = pending.try_emplace(target.producer.get(), Pending{g, unshared});
      if (!inserted) {
        Pending& sum = it->second;
        if (!sum.owned) sum = {sum.grad.clone(), true};
        ops::add_into(sum.grad, g);
      }
    } else {
      deliver_to_leaf(*target.leaf, g, unshared);
    }
  };

  for (const std::shared_ptr<Node>& owned : reverse_topological_order(root_node)) {
    Node& node = *owned;
    auto it = pending.find(&node);
    if (it == pending.end()) continue;  // reachable, but no gradient flowed into it
    Tensor grad_out = std::move(it->second.grad);
    pending.erase(it);
    GAT_CHECK(node.backward, "backward: the graph through '", node.op,
              "' was already back-propagated (its saved tensors are freed)");
    std::vector<Tensor> grads;
    {
      struct Running {
        explicit Running(const Node* node) { t_running = node; }
        ~Running() { t_running = nullptr; }
      } running(&node);
      grads = node.backward(grad_out);
    }
    GAT_CHECK(grads.size() == node.inputs.size(), "autograd: backward of '", node.op, "' gave ", grads.size(),
              " gradients for ", node.inputs.size(), " inputs");
    const std::vector<Edge> inputs = std::move(node.inputs);
    node.backward = nullptr;  // frees the saved tensors and the rest of the tape
    node.inputs.clear();
    grad_out = Tensor();
    std::vector<bool> unshared(grads.size());  // held by grads[i] alone (and the side work), without history
    for (size_t i = 0; i < grads.size(); ++i)
      unshared[i] = grads[i].defined() && grads[i].impl_ptr().use_count() == 1 + side.pending(grads[i]) &&
                    grads[i].impl().storage.use_count() == 1 && !grads[i].requires_grad();
    for (Tensor& grad : grads) grad = unchecked(std::move(grad));
    for (size_t i = 0; i < grads.size(); ++i) {
      const Edge& input = inputs[i];
      if ((!input.producer && !input.leaf) || !grads[i].defined()) continue;
      check_gradient(node, input, grads[i]);
      // A side gradient goes to a parameter's empty .grad as it is (the optimiser reads it after
      // the join); anything else would read it, or add to it, on the main stream.
      const bool into_side_grad = input.leaf && input.leaf->grad && side.pending(Tensor(input.leaf->grad));
      if (into_side_grad || (side.pending(grads[i]) && (input.producer || input.leaf->grad))) side.join();
      deliver(input, grads[i], unshared[i]);
    }
  }
  side.join();
}

}  // namespace gat::autograd
