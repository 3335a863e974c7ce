#include "gat/framework/init.h"

#include <cmath>
#include <vector>

namespace gat::init {

Tensor uniform(const Shape& shape, double bound, Generator& gen, DType dtype, Device device) {
  GAT_CHECK(dtype == DType::f32 || dtype == DType::f64, "init::uniform: dtype must be f32 or f64, got ",
            dtype_name(dtype));
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (double& v : values) v = -bound + 2.0 * bound * gen.uniform();  // torch's uniform_(-a, a)
  return Tensor::from_vector(values, shape).to(dtype).to(device);
}

Tensor normal(const Shape& shape, double std, Generator& gen, DType dtype, Device device) {
  GAT_CHECK(std::isfinite(std) && std >= 0, "init::normal: invalid standard deviation ", std);
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  const double two_pi = 6.283185307179586;
  for (size_t i = 0; i < values.size(); i += 2) {
    const double radius = std * std::sqrt(-2.0 * std::log(1.0 - gen.uniform()));  // 1 - u in (0, 1]
    const double angle = two_pi * gen.uniform();
    values[i] = radius * std::cos(angle);
    if (i + 1 < values.size()) values[i + 1] = radius * std::sin(angle);
  }
  return Tensor::from_vector(values, shape).to(dtype).to(device);
}

Tensor glorot_uniform(const Shape& shape, int64_t fan_in, int64_t fan_out, Generator& gen, DType dtype,
                      Device device) {
  GAT_CHECK(fan_in + fan_out > 0, "glorot_uniform: fan_in ", fan_in, " + fan_out ", fan_out,
            " must be positive (shape ", shape_str(shape), ")");
  return uniform(shape, std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)), gen, dtype, device);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) { return Tensor::zeros(shape, dtype, device); }

}  // namespace gat::init
