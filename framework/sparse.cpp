#include "gat/framework/sparse.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "gat/framework/detail/host_parallel.h"

namespace gat {

CsrMatrix CsrMatrix::from_dense(const Tensor& dense) {
  check_float("CsrMatrix::from_dense", "dense", dense);
  check_dim("CsrMatrix::from_dense", "dense", dense, 2);
  const Tensor host = dense.detach().to(Device::cpu);
  CsrMatrix m;
  m.rows_ = host.size(0);
  m.cols_ = host.size(1);
  GAT_CHECK(m.rows_ < std::numeric_limits<int32_t>::max() && m.cols_ < std::numeric_limits<int32_t>::max(),
            "CsrMatrix::from_dense: ", dense.describe(), " does not fit 32-bit indices");
  const size_t rows = static_cast<size_t>(m.rows_), cols = static_cast<size_t>(m.cols_);
  dispatch_float(host.dtype(), "CsrMatrix::from_dense", [&](auto zero) {
    using T = decltype(zero);
    const T* x = host.data<T>();                                  // (rows, cols)
    std::vector<int32_t> row_ptr(rows + 1, 0), col_idx, row_idx;  // (rows+1,), (nnz,), (nnz,)
    std::vector<T> values;                                        // (nnz,)
    std::vector<int32_t> t_row_ptr(cols + 1, 0);                  // (cols+1,)
    for (size_t i = 0; i < rows; ++i) {
      for (size_t k = 0; k < cols; ++k) {
        const T v = x[i * cols + k];
        if (v == T(0)) continue;
        col_idx.push_back(static_cast<int32_t>(k));
        row_idx.push_back(static_cast<int32_t>(i));
        values.push_back(v);
        ++t_row_ptr[k + 1];
      }
      GAT_CHECK(col_idx.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()),
                "CsrMatrix::from_dense: more non-zeros than 32-bit entry ids hold in ", dense.describe());
      row_ptr[i + 1] = static_cast<int32_t>(col_idx.size());
    }
    for (size_t k = 0; k < cols; ++k) t_row_ptr[k + 1] += t_row_ptr[k];
    // Entries in id order visit rows in ascending order, so each column comes out sorted by row.
    std::vector<int32_t> t_entry(col_idx.size());                                // (nnz,)
    std::vector<int32_t> fill(t_row_ptr.begin(), t_row_ptr.end() - 1);           // (cols,)
    std::vector<int32_t> t_row_idx(col_idx.size()), t_position(col_idx.size());  // (nnz,), (nnz,)
    for (size_t e = 0; e < col_idx.size(); ++e) {
      const int32_t p = fill[col_idx[e]]++;
      t_entry[static_cast<size_t>(p)] = static_cast<int32_t>(e);
      t_row_idx[static_cast<size_t>(p)] = row_idx[e];
      t_position[e] = p;
    }
    std::vector<int32_t> t_piece_ptr(cols + 1, 0), t_piece_col,
        t_split_cols;  // (cols+1,), (pieces,), (splits,)
    for (size_t k = 0; k < cols; ++k) {
      const int32_t length = t_row_ptr[k + 1] - t_row_ptr[k];
      const int32_t pieces = std::max<int32_t>(1, (length + kPieceEntries - 1) / kPieceEntries);
      t_piece_col.insert(t_piece_col.end(), static_cast<size_t>(pieces), static_cast<int32_t>(k));
      if (pieces > 1) t_split_cols.push_back(static_cast<int32_t>(k));
      t_piece_ptr[k + 1] = t_piece_ptr[k] + pieces;
    }
    const int64_t nnz = static_cast<int64_t>(col_idx.size());
    m.row_ptr_ = Tensor::from_vector(row_ptr, {m.rows_ + 1});
    m.col_idx_ = Tensor::from_vector(col_idx, {nnz});
    m.row_idx_ = Tensor::from_vector(row_idx, {nnz});
    m.values_ = Tensor::from_vector(values, {nnz});
    m.t_row_ptr_ = Tensor::from_vector(t_row_ptr, {m.cols_ + 1});
    m.t_entry_ = Tensor::from_vector(t_entry, {nnz});
    m.t_row_idx_ = Tensor::from_vector(t_row_idx, {nnz});
    m.t_position_ = Tensor::from_vector(t_position, {nnz});
    m.t_piece_ptr_ = Tensor::from_vector(t_piece_ptr, {m.cols_ + 1});
    m.t_piece_col_ = Tensor::from_vector(t_piece_col, {static_cast<int64_t>(t_piece_col.size())});
    m.t_split_cols_ = Tensor::from_vector(t_split_cols, {static_cast<int64_t>(t_split_cols.size())});
    m.t_piece_arrivals_ = Tensor::from_vector(std::vector<int32_t>(cols, 0), {m.cols_});
  });
  return m.to(dense.device());
}

Tensor CsrMatrix::to_dense() const {
  GAT_CHECK(values_.defined(), "CsrMatrix::to_dense: empty matrix");
  const std::vector<int32_t> rows = row_idx_.to_vector<int32_t>(), cols = col_idx_.to_vector<int32_t>();
  Tensor out = Tensor::zeros({rows_, cols_}, dtype());  // (rows, cols)
  const Tensor values = values_.detach().to(Device::cpu);
  dispatch_float(dtype(), "CsrMatrix::to_dense", [&](auto zero) {
    using T = decltype(zero);
    const T* v = values.data<T>();  // (nnz,)
    T* o = out.data<T>();           // (rows, cols)
    for (size_t e = 0; e < rows.size(); ++e) o[static_cast<int64_t>(rows[e]) * cols_ + cols[e]] = v[e];
  });
  return out.to(device());
}

CsrMatrix CsrMatrix::to(Device device) const {
  CsrMatrix out = *this;
  if (!values_.defined()) return out;
  to_each(device, {&out.row_ptr_, &out.col_idx_, &out.row_idx_, &out.values_, &out.t_row_ptr_, &out.t_entry_,
                   &out.t_piece_ptr_, &out.t_piece_col_, &out.t_split_cols_,
                   &out.t_piece_arrivals_});             // t_piece_arrivals_: zeros
  if (device != Device::cpu || !t_row_idx_.defined()) {  // the CPU's arrays stay on the host
    out.t_row_idx_ = Tensor();
    out.t_position_ = Tensor();
  }
  return out;
}

CsrMatrix CsrMatrix::with_values(const Tensor& values) const {
  check_defined("CsrMatrix::with_values", "values", values);
  GAT_CHECK(values.dtype() != DType::i32 && values.dtype() != DType::i64,
            "CsrMatrix::with_values: 'values' must be f32, f64 or bf16, got ", values.describe());
  check_shape("CsrMatrix::with_values", "values", values, {nnz()});
  GAT_CHECK(values.device() == device(), "CsrMatrix::with_values: values on ", device_name(values.device()),
            ", the matrix on ", device_name(device()));
  CsrMatrix out = *this;
  out.values_ = values;
  return out;
}

std::string CsrMatrix::describe() const {
  if (!values_.defined()) return "csr (empty)";
  std::ostringstream s;
  s << "csr " << dtype_name(dtype()) << ' ' << device_name(device()) << ' ' << shape_str({rows_, cols_})
    << " nnz " << nnz();
  return s.str();
}

Features Features::choose(const Tensor& x, double max_density) {
  check_float("Features::choose", "x", x);
  check_dim("Features::choose", "x", x, 2);
  if (max_density <= 0.0 || x.numel() == 0) return x;
  // Count first (in parallel): dense features (a synthetic graph's N x 32) never build a CSR.
  const Tensor host = x.detach().to(Device::cpu);
  const int64_t n = host.numel();
  int64_t nnz = 0;
  dispatch_float(host.dtype(), "Features::choose", [&](auto zero) {
    using T = decltype(zero);
    const T* v = host.data<T>();  // (rows * cols,)
#pragma omp parallel for reduction(+ : nnz) if (n > detail::kParallelItems)
    for (int64_t i = 0; i < n; ++i) nnz += v[i] != T(0);
  });
  if (static_cast<double>(nnz) < max_density * static_cast<double>(n)) return CsrMatrix::from_dense(x);
  return x;
}

const Tensor& Features::dense() const {
  GAT_CHECK(!is_sparse(), "Features::dense: the features are sparse (", describe(), ")");
  return std::get<Tensor>(value_);
}

const CsrMatrix& Features::sparse() const {
  GAT_CHECK(is_sparse(), "Features::sparse: the features are dense (", describe(), ")");
  return std::get<CsrMatrix>(value_);
}

int64_t Features::rows() const { return is_sparse() ? sparse().rows() : dense().size(0); }
int64_t Features::cols() const { return is_sparse() ? sparse().cols() : dense().size(1); }
Device Features::device() const { return is_sparse() ? sparse().device() : dense().device(); }

std::string Features::describe() const {
  return is_sparse() ? std::get<CsrMatrix>(value_).describe() : std::get<Tensor>(value_).describe();
}

}  // namespace gat
