// What gat_train and gat_bench do around their work so that the limits of their environment end
// in an error message and exit status 1, never in a signal or a crash:
//
//   int main(...) {
//     process::ignore_write_signals();
//     if (const std::string why = process::unfit_environment(); !why.empty()) ... exit 1
//     ... the work, printing to stdout ...
//     return process::check_stdout(status, "gat_train");
//   }
#pragma once

#include <cstddef>
#include <string>

namespace gat::process {

// The most OpenMP threads (gat_train's --threads, OMP_NUM_THREADS).
inline constexpr int kMaxThreads = 4096;

// The least stack (ulimit -s) the programs run with: twice the most a CPU run was measured to use
// (32 KiB: the main thread and the OpenMP threads, whose stacks glibc sizes by the same limit).
inline constexpr size_t kMinStackBytes = size_t{64} << 10;

// The stack each new thread (OpenMP's workers) gets when ulimit -s asks for less: glibc sizes a
// thread's stack by that limit and keeps the libraries' thread-local storage in it (cuBLASLt's
// alone is 92 KiB), so a CUDA build's workers overflowed a 128 KiB limit in a CPU matrix product.
inline constexpr size_t kThreadStackBytes = size_t{2} << 20;

// Threads started from now on get at least kThreadStackBytes of stack. Call before the first
// parallel region.
void size_thread_stacks();

// SIGXFSZ and SIGPIPE ignored: a write past the file size limit (ulimit -f) fails with EFBIG, and
// a write to a closed pipe with EPIPE, and the output that failed says so; either signal killed
// the process without a word.
void ignore_write_signals();

// Why the process cannot run here, or "" when it can: OpenMP would start more than kMaxThreads
// threads (OMP_NUM_THREADS=100000 crashed inside libgomp), or the stack limit is below
// kMinStackBytes (a smaller stack overflowed: SIGSEGV).
std::string unfit_environment();

// Flushes stdout. When a write of it failed (a full disk, a closed pipe, /dev/full), says so on
// stderr, "<program>: writing the output to stdout failed: <why>", and returns 1 in place of a 0
// `status`; else returns `status`.
int check_stdout(int status, const char* program);

}  // namespace gat::process
