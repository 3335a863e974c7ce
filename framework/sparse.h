// CsrMatrix: a sparse (rows, cols) matrix in CSR form, for node features that are mostly zeros
// (bag-of-words rows: Cora 1.3% non-zero). Features: the input of a layer, dense or sparse.
//
// Entry e (0..nnz-1) of the CSR lies in row row_idx[e], column col_idx[e], with value values[e];
// the entries of row i are [row_ptr[i], row_ptr[i+1]), sorted by column. The transpose plan lists,
// for every column k, its entries in [t_row_ptr[k], t_row_ptr[k+1]) sorted by row: t_entry[p] is
// the entry id. Products with A^T (the weight gradient A^T G) gather over it in this fixed order,
// so they need no float atomics and are bitwise reproducible (as framework/graph.h does for graphs).
//
// The transpose is also cut into pieces for CUDA's block-per-column products: a column's entries
// in pieces of at most kPieceEntries (an empty column has one, empty), whose partial sums are then
// added in piece order, so a product is not held by its longest column (Cora's most common word
// is in 1,083 documents) and stays reproducible.
//
// The index arrays are shared between copies (cheap handles, as Tensor); `with_values` gives the
// same pattern with other values (sparse_dropout's output, whose dropped entries hold zeros).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "gat/framework/tensor.h"

namespace gat {

class CsrMatrix {
 public:
  CsrMatrix() = default;

  // The non-zeros of a 2-D f32|f64 tensor (any device; built on the host, then copied back).
  static CsrMatrix from_dense(const Tensor& dense);
  // The dense (rows, cols) matrix, on the matrix's device.
  Tensor to_dense() const;
  // Copy of every array to `device`; values keep their autograd history only if already there.
  CsrMatrix to(Device device) const;
  // The same pattern holding `values` (nnz,) f32|f64|bf16 on the same device (bf16: features in
  // bf16 precision, which the products read through f32).
  CsrMatrix with_values(const Tensor& values) const;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t nnz() const { return values_.defined() ? values_.numel() : 0; }
  DType dtype() const { return values_.dtype(); }
  Device device() const { return values_.device(); }
  bool is_cuda() const { return device() == Device::cuda; }
  std::string describe() const;  // "csr f32 cpu (2708, 1433) nnz 49216"

  const Tensor& row_ptr() const { return row_ptr_; }      // (rows+1,) i32
  const Tensor& col_idx() const { return col_idx_; }      // (nnz,) i32: column of each entry
  const Tensor& row_idx() const { return row_idx_; }      // (nnz,) i32: row of each entry
  const Tensor& values() const { return values_; }        // (nnz,) f32|f64|bf16
  const Tensor& t_row_ptr() const { return t_row_ptr_; }  // (cols+1,) i32
  const Tensor& t_entry() const { return t_entry_; }      // (nnz,) i32: entry id, by column then row
  // The transpose for the CPU's products with A^T, which then read every array in order: the row
  // of each of its entries, t_row_idx[p] = row_idx[t_entry[p]], and where each entry lies in it,
  // t_position[t_entry[p]] = p (a product puts its values in the transpose's order through it,
  // writing at random places rather than reading at them). On the host only: undefined on CUDA.
  const Tensor& t_row_idx() const { return t_row_idx_; }    // (nnz,) i32, or undefined
  const Tensor& t_position() const { return t_position_; }  // (nnz,) i32, or undefined
  // The transpose's pieces: column k's are [t_piece_ptr[k], t_piece_ptr[k+1]), piece p holds the
  // column's entries from t_row_ptr[k] + (p - t_piece_ptr[k]) * kPieceEntries on.
  static constexpr int kPieceEntries = 64;
  const Tensor& t_piece_ptr() const { return t_piece_ptr_; }    // (cols+1,) i32
  const Tensor& t_piece_col() const { return t_piece_col_; }    // (pieces,) i32: the column of each piece
  const Tensor& t_split_cols() const { return t_split_cols_; }  // (splits,) i32: columns of 2+ pieces
  // Per column, how many of its pieces a CUDA product through the pieces has finished: the last
  // one adds the column's pieces and sets it back to zero, so it is zero between products. Shared
  // by the matrix's copies on one device: two products with one matrix's transpose must not run
  // at once (the framework queues them on one stream).
  const Tensor& t_piece_arrivals() const { return t_piece_arrivals_; }  // (cols,) i32

 private:
  int64_t rows_ = 0, cols_ = 0;
  Tensor row_ptr_, col_idx_, row_idx_, values_, t_row_ptr_, t_entry_, t_piece_ptr_, t_piece_col_,
      t_split_cols_, t_piece_arrivals_, t_row_idx_, t_position_;
};

// The node features a layer takes: a dense (N, F) tensor or a CsrMatrix. Converts implicitly from
// either, so code written for dense tensors keeps working.
class Features {
 public:
  Features(Tensor dense) : value_(std::move(dense)) {}       // NOLINT(google-explicit-constructor)
  Features(CsrMatrix sparse) : value_(std::move(sparse)) {}  // NOLINT(google-explicit-constructor)

  // Sparse when fewer than max_density of x's elements are non-zero, x itself otherwise (builds
  // the CsrMatrix on the host). Below 10% the sparse first layer is the faster one.
  static constexpr double kDefaultMaxDensity = 0.1;
  static Features choose(const Tensor& x, double max_density = kDefaultMaxDensity);

  bool is_sparse() const { return std::holds_alternative<CsrMatrix>(value_); }
  const Tensor& dense() const;      // throws when sparse
  const CsrMatrix& sparse() const;  // throws when dense
  int64_t rows() const;
  int64_t cols() const;
  Device device() const;
  std::string describe() const;

 private:
  std::variant<Tensor, CsrMatrix> value_;
};

}  // namespace gat
