#include "gat/framework/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <utility>

#include "gat/framework/autograd.h"
#include "gat/framework/cuda_runtime.h"
#include "gat/framework/ops/detail/convert.h"
#include "gat/framework/ops/fill.h"
#include "gat/framework/ops/to_dtype.h"

namespace gat {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
    case DType::bf16:
      return 2;
    case DType::i64:
      return 8;
  }
  GAT_FAIL("dtype_size: unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::bf16:
      return "bf16";
    case DType::i64:
      return "i64";
  }
  return "unknown";
}

const char* device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << (shape.size() == 1 ? ",)" : ")");
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    GAT_CHECK(s >= 0, "negative dimension in shape ", shape_str(shape));
    GAT_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape_str(shape), " has more than 2^63 elements");
  }
  return n;
}

// ---- Storage ----------------------------------------------------------------

Storage::Storage(size_t bytes, Device device, const char* what) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device == Device::cpu) {
    // 64-byte alignment for Eigen's and the compiler's vector loads.
    data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data_) throw Error(detail::concat(what, ": out of host memory allocating ", bytes, " bytes"));
  } else if ((allocator_ = cuda::external_allocator()) != nullptr) {
    data_ = allocator_->allocate(bytes);
  } else {
    data_ = cuda::malloc(bytes, what);
  }
}

Storage::Storage(void* data, size_t bytes, Device device, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), device_(device), owned_(false), owner_(std::move(owner)) {
  GAT_CHECK(data != nullptr || bytes == 0, "Storage: a view of ", bytes, " bytes at a null pointer");
}

Storage::~Storage() {
  if (!data_ || !owned_) return;
  if (device_ == Device::cpu)
    std::free(data_);
  else if (allocator_)
    allocator_->deallocate(data_);
  else
    cuda::free(data_);
}

namespace {

template <class T>
int64_t first_non_finite_of(const std::vector<T>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(ops::detail::convert_value<double>(values[i]))) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace

int64_t first_non_finite(const Tensor& t) {
  if (t.dtype() == DType::f32) return first_non_finite_of(t.to_vector<float>());
  if (t.dtype() == DType::f64) return first_non_finite_of(t.to_vector<double>());
  if (t.dtype() == DType::bf16) return first_non_finite_of(t.to_vector<bf16>());
  return -1;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::cpu && src_device == Device::cpu)
    std::memcpy(dst, src, bytes);
  else
    cuda::memcpy(dst, dst_device == Device::cuda, src, src_device == Device::cuda, bytes);
}

// ---- Tensor -------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, const char* what) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  int64_t bytes = 0;
  GAT_CHECK(!__builtin_mul_overflow(shape_numel(shape), static_cast<int64_t>(dtype_size(dtype)), &bytes),
            what, ": ", shape_str(shape), " of ", dtype_name(dtype), " is more than 2^63 bytes");
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(bytes), device, what);
  return Tensor(std::move(impl));
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device,
                         std::shared_ptr<void> owner) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  impl->storage = std::make_shared<Storage>(data, bytes, device, std::move(owner));
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  ops::fill_(t, value);  // on CUDA a kernel: no host copy, no sync
  return t;
}

int64_t Tensor::size(int64_t axis) const {
  const int64_t d = dim();
  const int64_t a = axis < 0 ? axis + d : axis;
  GAT_CHECK(a >= 0 && a < d, "Tensor::size(", axis, ") on a tensor of shape ", shape_str(shape()));
  return shape()[static_cast<size_t>(a)];
}

std::string describe_tensor(DType dtype, Device device, const Shape& shape) {
  return detail::concat(dtype_name(dtype), ' ', device_name(device), ' ', shape_str(shape));
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return describe_tensor(dtype(), device(), shape());
}

double Tensor::item() const {
  GAT_CHECK(numel() == 1, "Tensor::item() on a tensor of ", describe(), " (needs one element)");
  switch (dtype()) {
    case DType::f32:
      return to_vector<float>()[0];
    case DType::f64:
      return to_vector<double>()[0];
    case DType::i32:
      return to_vector<int32_t>()[0];
    case DType::bf16:
      return to_f32(to_vector<bf16>()[0]);
    case DType::i64:
      return static_cast<double>(to_vector<int64_t>()[0]);
  }
  GAT_FAIL("Tensor::item: unknown dtype");
}

Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  Tensor out = empty(shape(), dtype(), target, "Tensor::to");
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType target) const {
  if (dtype() == target) return clone();
  Tensor out = empty(shape(), target, device(), "Tensor::to(dtype)");
  ops::kernels::to_dtype(*this, out);  // on CUDA a kernel: no host copy
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device(), "Tensor::clone");
  out.copy_(*this);
  return out;
}

Tensor Tensor::alias() const {
  auto out = std::make_shared<TensorImpl>();
  out->shape = shape();
  out->dtype = dtype();
  out->storage = impl().storage;
  out->offset = impl().offset;
  out->saved_version = impl().saved_version;
  return Tensor(std::move(out));
}

Tensor Tensor::detach() const {
  Tensor out = alias();
  // In a backward pass nothing is saved for a later one: the handle stays as checked as this one.
  if (!autograd::in_backward()) out.impl().saved_version = static_cast<int64_t>(impl().storage->version());
  return out;
}

void Tensor::check_saved_version() const {
  autograd::check_saved(*this, static_cast<uint64_t>(impl().saved_version));
}

Tensor Tensor::view(const Shape& new_shape) const {
  Shape resolved = new_shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < resolved.size(); ++i) {
    if (resolved[i] == -1) {
      GAT_CHECK(infer < 0, "view: more than one -1 in ", shape_str(new_shape));
      infer = static_cast<int64_t>(i);
    } else {
      GAT_CHECK(resolved[i] >= 0, "view: negative dimension in ", shape_str(new_shape));
      known *= resolved[i];
    }
  }
  if (infer >= 0) {
    GAT_CHECK(known > 0 && numel() % known == 0, "view: cannot view ", shape_str(shape()), " as ",
              shape_str(new_shape));
    resolved[static_cast<size_t>(infer)] = numel() / known;
  }
  GAT_CHECK(shape_numel(resolved) == numel(), "view: cannot view ", shape_str(shape()), " (", numel(),
            " elements) as ", shape_str(new_shape));
  Tensor out = alias();
  out.impl().shape = resolved;
  return out;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  GAT_CHECK(dim() >= 1 && 0 <= begin && begin <= end && end <= size(0), "rows: [", begin, ", ", end,
            ") is not a range of rows of a tensor of ", describe());
  Tensor out = alias();
  out.impl().shape[0] = end - begin;
  out.impl().offset +=
      static_cast<size_t>(begin * (size(0) == 0 ? 0 : numel() / size(0))) * dtype_size(dtype());
  return out;
}

void Tensor::copy_(const Tensor& src) {
  GAT_CHECK(src.shape() == shape() && src.dtype() == dtype(), "Tensor::copy_: source ", src.describe(),
            " does not match destination ", describe());
  copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
  mark_modified();
}

void Tensor::zero_() {
  mark_modified();
  if (nbytes() == 0) return;  // an empty tensor has no storage: memset(nullptr, ...) is undefined
  if (device() == Device::cpu)
    std::memset(raw_data(), 0, nbytes());
  else
    cuda::memset_zero(raw_data(), nbytes());
}

void to_each(Device device, std::initializer_list<Tensor*> tensors) {
  for (Tensor* t : tensors) *t = t->to(device);
}

void Tensor::move_to_(Device target) {
  if (device() == target) return;
  Tensor moved = to(target);
  impl().storage = moved.impl().storage;
  impl().offset = 0;
  if (impl().grad) Tensor(impl().grad).move_to_(target);
}

Tensor& Tensor::set_requires_grad(bool on) {
  GAT_CHECK(!on || (dtype() != DType::i32 && dtype() != DType::i64), "set_requires_grad: an integer tensor (",
            describe(), ") has no gradient");
  impl().requires_grad = on;
  return *this;
}

void Tensor::zero_grad() { impl().grad.reset(); }

void Tensor::backward(Tensor grad_output) const { autograd::backward(*this, std::move(grad_output)); }

// ---- entry-point checks ---------------------------------------------------------

void check_defined(const char* op, const char* arg, const Tensor& t) {
  GAT_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_dtype(const char* op, const char* arg, const Tensor& t, DType dtype) {
  check_defined(op, arg, t);
  GAT_CHECK(t.dtype() == dtype, op, ": '", arg, "' must be ", dtype_name(dtype), ", got ", t.describe());
}

void check_float(const char* op, const char* arg, const Tensor& t) {
  check_defined(op, arg, t);
  GAT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, ": '", arg, "' must be f32 or f64, got ",
            t.describe());
}

void check_dim(const char* op, const char* arg, const Tensor& t, int64_t dim) {
  check_defined(op, arg, t);
  GAT_CHECK(t.dim() == dim, op, ": '", arg, "' must have ", dim, " dimensions, got ", t.describe());
}

void check_shape(const char* op, const char* arg, const Tensor& t, const Shape& shape) {
  check_defined(op, arg, t);
  GAT_CHECK(t.shape() == shape, op, ": '", arg, "' must have shape ", shape_str(shape), ", got ",
            t.describe());
}

void check_same(const char* op, const char* arg_a, const Tensor& a, const char* arg_b, const Tensor& b) {
  check_defined(op, arg_a, a);
  check_defined(op, arg_b, b);
  GAT_CHECK(a.device() == b.device(), op, ": '", arg_a, "' ", a.describe(), " and '", arg_b, "' ",
            b.describe(), " are on different devices");
  GAT_CHECK(a.dtype() == b.dtype(), op, ": '", arg_a, "' ", a.describe(), " and '", arg_b, "' ", b.describe(),
            " have different dtypes");
}

}  // namespace gat
