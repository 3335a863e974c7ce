// NumPy's .npy files (format versions 1.0, 2.0 and 3.0): little-endian or single-byte numbers in
// C order, as numpy.save writes them. PPI's raw files are of this format (datasets/ppi.h).
//
// Read: the dtypes <f4 <f8, <i1 <i2 <i4 <i8 (or |i1), |u1 <u2 <u4 <u8 and |b1 ('=' is read as '<'
// on this little-endian host). Refused with a gat::Error naming the file: another magic or
// version, a header that is not the dict numpy writes ('descr', 'fortran_order', 'shape'),
// fortran_order True, a big-endian or other dtype, a negative or overflowing shape, and data
// shorter or longer than the shape says (a truncated file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gat/framework/tensor.h"

namespace gat {

struct NpyArray {
  std::string descr;        // as in the header, e.g. "<f4"
  Shape shape;              // () for a scalar
  std::string bytes;        // numel * itemsize bytes, C order
  bool is_float() const;    // f4, f8
  bool is_integer() const;  // i*, u*, b1
  int64_t numel() const;
  std::vector<double> values() const;  // every element as a double (exact for |value| <= 2^53)
};

// `bytes`, the whole of a .npy file; `name` starts every error message.
NpyArray parse_npy(const std::string& bytes, const std::string& name);
// The file at `path` (io::read_regular_file), parsed.
NpyArray read_npy(const std::string& path);

// Bytes of a .npy file (version 1.0) holding `values` in `descr` (f4, f8, i4, i8, u1 as read
// above) with `shape`: what the tests write, and what numpy.load reads.
std::string npy_bytes(const std::string& descr, const Shape& shape, const std::vector<double>& values);

}  // namespace gat
