// BatchNorm1d: torch.nn.BatchNorm1d(C, eps, momentum, affine, track_running_stats=True) for
// inputs (N, C).
//
// Training mode normalises with the batch's statistics and updates the running ones
// (running_mean starts at 0, running_var at 1; the running variance takes the unbiased batch
// variance); eval mode normalises with the running statistics. The running statistics are
// buffers: checkpoints save them beside weight and bias (running_mean, running_var, as in
// torch's state_dict; momentum=None, torch's cumulative average, is not offered, so there is no
// num_batches_tracked).
#pragma once

#include <cstdint>

#include "gat/framework/module.h"
#include "gat/framework/tensor.h"

namespace gat {

class BatchNorm1d : public Module {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                       DType dtype = DType::f32);

  // x: (N, C) -> (N, C) (ops::batch_norm); in training mode N >= 2 and the running statistics
  // change (in place: the buffers are shared handles).
  Tensor forward(const Tensor& x) const;

  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

  Tensor weight;        // (C,), undefined without affine; starts at ones
  Tensor bias;          // (C,), undefined without affine; starts at zeros
  Tensor running_mean;  // (C,) buffer
  Tensor running_var;   // (C,) buffer

 private:
  double eps_, momentum_;
};

}  // namespace gat
