// Work queued beside the main CUDA stream (cuda::OnSideStream) that keeps the memory it uses
// alive until its join: the gradients a backward pass hands straight to parameters, an epoch's
// metrics. On Cora the step's kernels leave the device mostly idle, so work nothing on the main
// stream waits for runs in the gaps; a recorded step gets it as a parallel branch.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/tensor.h"

namespace gat {

class SideWork {
 public:
  // Side work whose inputs hold more bytes than this runs where it is called: at that size its
  // kernels fill the device alone, and keeping the inputs until the join would raise the peak.
  static constexpr size_t kMaxSideBytes = size_t(16) << 20;
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  SideWork() = default;
  ~SideWork();  // joins
  SideWork(const SideWork&) = delete;
  SideWork& operator=(const SideWork&) = delete;

  // work(inputs), queued on the side stream when every defined input is a CUDA tensor and they
  // hold at most kMaxSideBytes, else on the current stream. `inputs` must hold every tensor the
  // work's kernels read; they, and the outputs, are kept until join(). No output may share an
  // input's storage, and until join() only side work may use an output.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const Fn& work);
  // Whether t is an output of side work not joined yet, and how many references to it this
  // object holds (1 then, else 0).
  bool pending(const Tensor& t) const;
  // Makes the main stream wait for this object's side work (and the side stream's work queued
  // before it), not for side work queued after it, and lets go of what it kept.
  void join();

 private:
  std::vector<Tensor> inputs_, outputs_;  // of the side work since the last join
  std::unique_ptr<cuda::SideMark> mark_;  // after this object's last side work
};

}  // namespace gat
