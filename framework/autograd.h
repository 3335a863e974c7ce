// A small tape-based autograd.
//
// An op computes its output, then calls autograd::record(...). When gradients are enabled and an
// input requires grad, the output gets a Node whose `backward` maps d(output) to d(input_i) for
// each input (an undefined Tensor where an input needs none). `loss.backward()` walks the Nodes
// reachable from the loss in reverse topological order.
//
// Gradient contract:
//  - leaf tensors (requires_grad, no grad_fn) ACCUMULATE into .grad (+=) across backward calls
//    until zero_grad(); optimisers read .grad;
//  - a tensor used by several ops receives the sum of their gradients;
//  - a gradient that a backward closure made and nothing else holds becomes the leaf's .grad (or
//    the running sum) as it is; one that may alias another tensor is copied first;
//  - backward closures must not capture their own output with its history (use detach()), or
//    the output would keep itself alive;
//  - the tape holds what the closures save and Edges to the inputs' producers, not the inputs:
//    an intermediate tensor lives from the forward to the backward only if a closure saved it;
//  - after backward the tape's closures are released (saved tensors freed); a second backward
//    through the same graph throws.
//
// Saved tensors. A closure saves what it captures with detach(), and detach() records the
// version of the tensor's storage (Storage::version, shared by every view and handle of it, and
// bumped by every in-place write: copy_, zero_, ops::fill_, ops::add_into, an optimiser step).
// When a closure reads the data of a saved tensor whose storage has been modified in place since,
// the pass throws gat::Error naming the op, which of its inputs (or its output) it is, and both
// versions: the gradient would be computed from values the forward pass did not use. So no op can
// forget the check: it is in the save. Modifying a tensor before the forward pass, or between
// passes, is fine; so is modifying an input that the op did not save (add keeps neither).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gat/framework/side_work.h"
#include "gat/framework/tensor.h"

namespace gat {

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node;

// Where the gradient of one input of a Node goes: the Node that produced the input (an
// intermediate tensor), or the input itself when it is a leaf that requires grad (its .grad);
// neither for an input that needs no gradient. An edge does not hold an intermediate tensor's
// storage: a tensor that no closure saved is freed as soon as the forward pass lets it go, not
// when the backward pass reaches its consumer.
struct Edge {
  std::shared_ptr<Node> producer;    // the input's grad_fn, or null
  std::shared_ptr<TensorImpl> leaf;  // a leaf input that requires grad, or null
  Shape shape;                       // the input's, to check the gradient a closure returns
  const Storage* storage = nullptr;  // the input's data, to name a saved tensor in an error (never read)
  DType dtype = DType::f32;
  Device device = Device::cpu;
};

struct Node {
  std::string op;                           // the op's name, for error messages
  const Storage* output_storage = nullptr;  // the output's data, to name a saved tensor (never read)
  std::vector<Edge> inputs;                 // one per input the op differentiates with respect to
  BackwardFn backward;                      // empty once run
};

namespace autograd {

bool grad_enabled();

// True while a backward closure runs.
bool in_backward();

// Called when `t`, saved at `saved_version`, is read with its storage at another version: throws
// inside a backward closure (naming the op and the tensor); does nothing outside one.
void check_saved(const Tensor& t, uint64_t saved_version);

// Disables recording in its scope (evaluation, optimiser updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and any of `inputs` requires grad.
bool needs_grad(const std::vector<Tensor>& inputs);

// Attaches a Node to `out` when needs_grad(inputs); returns `out` either way.
Tensor record(const char* op, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward);

// Back-propagates from `root`. grad_root defaults to ones for a one-element root. A gradient
// handed over (a temporary, or std::move) is freed as soon as the root's node has used it, not
// at the end of the pass (the trainer's (N, C) gradient of the logits would otherwise be alive at
// the pass's memory peak); one the caller keeps is only read. The pass joins its side work
// (side_gradients) before it returns.
void backward(const Tensor& root, Tensor grad_root = Tensor());

// In a backward closure: gradients the rest of the pass does not wait for (a weight's, from
// tensors the closure has already made), computed as side work of the pass (SideWork::run: the
// inputs must hold every tensor `work` reads, and no output may share an input's storage). The closure
// returns them as any other gradient; the pass hands one that goes to a parameter's empty .grad
// over as it is and joins the side work before delivering one anywhere else. Outside a backward
// pass: work(inputs).
std::vector<Tensor> side_gradients(const std::vector<Tensor>& inputs, const SideWork::Fn& work);

}  // namespace autograd
}  // namespace gat
