// Tensor: a contiguous, row-major block of one dtype on one device, with shared storage.
//
// A Tensor is a cheap handle (shared_ptr to TensorImpl). Copies of the handle alias the same
// data; `clone()` copies data, `to(device)` copies across devices, nothing copies implicitly.
// Autograd state (requires_grad, grad, grad_fn) lives on the TensorImpl: see autograd.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "gat/framework/bfloat16.h"
#include "gat/framework/check.h"

namespace gat {

// bf16: 16-bit storage of f32 values (framework/bfloat16.h), for bf16 precision (docs/precision.md).
// i64: the offsets of a graph of 2^31 edges or more (Graph::offset_dtype).
enum class DType : uint8_t { f32, f64, i32, bf16, i64 };
enum class Device : uint8_t { cpu, cuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

// dtype_of<T>: its `value` is the DType of elements of type T, for the five element types only.
template <class T>
struct dtype_of;
template <>
struct dtype_of<float> : std::integral_constant<DType, DType::f32> {};
template <>
struct dtype_of<double> : std::integral_constant<DType, DType::f64> {};
template <>
struct dtype_of<int32_t> : std::integral_constant<DType, DType::i32> {};
template <>
struct dtype_of<bf16> : std::integral_constant<DType, DType::bf16> {};
template <>
struct dtype_of<int64_t> : std::integral_constant<DType, DType::i64> {};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "(2, 3)"
int64_t shape_numel(const Shape& shape);
std::string describe_tensor(DType dtype, Device device, const Shape& shape);  // "f32 cuda (2, 3)"

namespace cuda {
class ExternalAllocator;
}  // namespace cuda

// Raw bytes on one device. Move-only; freed when the last Tensor using it goes.
// CUDA memory comes from the stream-ordered allocator in framework/cuda_runtime.h, or from the
// external allocator installed on this thread (cuda::UseExternal) when the storage was made; it
// goes back to the allocator it came from.
class Storage {
 public:
  Storage(size_t bytes, Device device, const char* what);
  // A view of memory that something else owns (a PyTorch tensor's, a caller's buffer): never freed
  // here. `owner` (may be null) is kept alive as long as this storage.
  Storage(void* data, size_t bytes, Device device, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // The number of in-place modifications of the data so far (Tensor::mark_modified): one counter
  // for every tensor over this storage (views, detached handles). Autograd compares it with the
  // version a backward closure saved (TensorImpl::saved_version).
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  uint64_t version_ = 0;
  size_t bytes_ = 0;
  Device device_;
  bool owned_ = true;                             // false for a view
  cuda::ExternalAllocator* allocator_ = nullptr;  // the external allocator data_ came from, if any
  std::shared_ptr<void> owner_;                   // a view's owner
};

struct Node;  // autograd.h

struct TensorImpl {
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes into storage
  // The storage's version when detach() made this handle (what a backward closure saves), or -1
  // for a handle that is not checked. Reading the data of a handle whose storage has moved on
  // since, inside a backward pass, throws (autograd.h, "Saved tensors").
  int64_t saved_version = -1;
  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient of a leaf (same shape/dtype/device)
  std::shared_ptr<Node> grad_fn;     // the op that produced this tensor, if recorded
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (contents of `empty` are uninitialised) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu,
                      const char* what = "tensor");
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu);
  // A tensor over memory that something else owns (like torch::from_blob): `data` on `device`,
  // contiguous and row-major, at least 64-byte aligned where CPU kernels vectorise. Nothing is
  // copied; `owner` (may be null) is kept alive as long as any handle to the tensor.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device,
                          std::shared_ptr<void> owner = nullptr);
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu) {
    return full({}, value, dtype, device);
  }

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t axis) const;  // negative axis counts from the end
  int64_t numel() const { return shape_numel(impl().shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device() == Device::cuda; }
  std::string describe() const;  // "f32 cuda (2, 3)"

  // ---- data access (pointer on the tensor's device; T must match the dtype) ----
  template <class T>
  T* data() const {
    GAT_CHECK(dtype() == dtype_of<T>::value, "Tensor::data<", dtype_name(dtype_of<T>::value),
              ">() on a tensor of ", describe());
    return reinterpret_cast<T*>(raw_data());
  }
  void* raw_data() const {
    const TensorImpl& i = impl();
    if (i.saved_version >= 0 && static_cast<uint64_t>(i.saved_version) != i.storage->version())
      check_saved_version();
    return static_cast<char*>(i.storage->data()) + i.offset;
  }
  template <class T>
  std::vector<T> to_vector() const;  // copies to host
  double item() const;               // one-element tensor, any dtype/device

  // ---- copies and views (no autograd) ----
  Tensor to(Device device) const;  // copy to device (returns *this handle if already there)
  // Converted copy (same device, no autograd: ops::to_dtype records one). To bf16: rounded to
  // nearest even (bfloat16.h); to i32: truncated toward zero.
  Tensor to(DType dtype) const;
  Tensor clone() const;  // deep copy, same dtype/device, no autograd history
  // Same storage, no autograd history. Outside a backward pass the handle records the storage's
  // version (saved_version): a backward closure that captures it (as every op's does) reads it
  // only while nothing has modified the storage in place since.
  Tensor detach() const;
  // Views: same storage, no autograd; a view of a saved handle is checked as the handle is.
  Tensor alias() const;                           // same shape
  Tensor view(const Shape& shape) const;          // new shape (one -1 allowed)
  Tensor rows(int64_t begin, int64_t end) const;  // [begin, end) along axis 0
  void copy_(const Tensor& src);                  // elementwise copy of equal shape/dtype, any devices
  void zero_();                                   // fill with zeros, in place
  // Records an in-place write into this tensor's data (bumps its storage's version). Every
  // in-place write calls it: copy_, zero_, ops::fill_, ops::add_into, the optimisers' updates.
  void mark_modified() const { impl().storage->bump_version(); }
  // Moves this tensor's data to `device` in place: every handle to it (module parameters,
  // optimiser references) sees the new storage. Gradients move too.
  void move_to_(Device device);

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  Tensor grad() const { return Tensor(impl().grad); }  // undefined until backward reaches it
  void zero_grad();                                    // drops the accumulated gradient
  void backward(Tensor grad_output = Tensor()) const;  // see autograd::backward

  TensorImpl& impl() const {
    GAT_CHECK(impl_ != nullptr, "use of an undefined Tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  // Throws inside a backward pass (the handle was saved, then its storage modified in place).
  void check_saved_version() const;

  std::shared_ptr<TensorImpl> impl_;
};

// Copies `bytes` between host and device pointers (either may be on either device).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// The flat index of t's first NaN or infinity (a device tensor is copied to the host first), or
// -1 when it has none (always for i32): how loaded numbers are checked before they are used.
int64_t first_non_finite(const Tensor& t);

// *t = t->to(device) for each t: the tensors of a structure (a Graph, a CsrMatrix) moving together.
void to_each(Device device, std::initializer_list<Tensor*> tensors);

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  GAT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "Tensor::from_vector: ", values.size(),
            " values for shape ", shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>::value, device);
  copy_bytes(t.raw_data(), device, values.data(), Device::cpu, values.size() * sizeof(T));
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  GAT_CHECK(dtype() == dtype_of<T>::value, "Tensor::to_vector<", dtype_name(dtype_of<T>::value),
            ">() on a tensor of ", describe());
  std::vector<T> out(static_cast<size_t>(numel()));
  copy_bytes(out.data(), Device::cpu, raw_data(), device(), nbytes());
  return out;
}

// ---- checks at op entry points: messages name the op, the argument and the shapes ----
void check_defined(const char* op, const char* arg, const Tensor& t);
void check_dtype(const char* op, const char* arg, const Tensor& t, DType dtype);
void check_float(const char* op, const char* arg, const Tensor& t);  // f32 or f64
void check_dim(const char* op, const char* arg, const Tensor& t, int64_t dim);
void check_shape(const char* op, const char* arg, const Tensor& t, const Shape& shape);
// Same device and dtype, for tensors that meet in one op.
void check_same(const char* op, const char* arg_a, const Tensor& a, const char* arg_b, const Tensor& b);

// Calls f(T{}) with T = float or double according to dtype; other dtypes throw naming `op`.
template <class F>
decltype(auto) dispatch_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    default:
      break;
  }
  GAT_FAIL(op, ": unsupported dtype ", dtype_name(dtype), " (expected f32 or f64)");
}

// Calls f(T{}) with T the C++ type of dtype (float, double, int32_t, bf16 or int64_t).
template <class F>
void dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::i32:
      return f(int32_t{});
    case DType::bf16:
      return f(bf16{});
    case DType::i64:
      return f(int64_t{});
  }
}

}  // namespace gat
