#include "gat/framework/side_work.h"

#include "gat/framework/check.h"
#include "gat/framework/cuda_runtime.h"

namespace gat {

SideWork::~SideWork() {
  // No throw from a destructor: a failing join here means the device has failed, which the next
  // checked call reports.
  try {
    join();
  } catch (const std::exception&) {
  }
}

std::vector<Tensor> SideWork::run(const std::vector<Tensor>& inputs, const Fn& work) {
  size_t bytes = 0;
  bool beside = true;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    beside = beside && t.is_cuda();
    bytes += t.nbytes();
  }
  if (!beside || bytes > kMaxSideBytes) return work(inputs);
  for (const Tensor& in : inputs)  // kept first: a failing work may have queued kernels already
    if (in.defined()) inputs_.push_back(in);
  std::vector<Tensor> outputs;
  {
    cuda::OnSideStream on_side;
    try {
      outputs = work(inputs);
    } catch (...) {  // what it queued before it failed is joined too
      mark_ = std::make_unique<cuda::SideMark>();
      throw;
    }
  }
  mark_ = std::make_unique<cuda::SideMark>();
  for (const Tensor& out : outputs) {
    if (!out.defined()) continue;
    outputs_.push_back(out);
    for (const Tensor& in : inputs)
      GAT_CHECK(!in.defined() || in.impl().storage != out.impl().storage,
                "SideWork: an output shares the storage of an input (side work must make its outputs)");
  }
  return outputs;
}

bool SideWork::pending(const Tensor& t) const {
  if (!t.defined()) return false;
  for (const Tensor& out : outputs_)
    if (out.impl_ptr() == t.impl_ptr()) return true;
  return false;
}

void SideWork::join() {
  if (mark_) mark_->join();
  mark_.reset();
  inputs_.clear();
  outputs_.clear();
}

}  // namespace gat
