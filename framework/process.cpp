#include "gat/framework/process.h"

#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "gat/framework/check.h"

namespace gat::process {

void ignore_write_signals() {
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
}

void size_thread_stacks() {
  pthread_attr_t attr;
  if (pthread_getattr_default_np(&attr) != 0) return;
  size_t size = 0;
  if (pthread_attr_getstacksize(&attr, &size) == 0 && size < kThreadStackBytes &&
      pthread_attr_setstacksize(&attr, kThreadStackBytes) == 0)
    pthread_setattr_default_np(&attr);
  pthread_attr_destroy(&attr);
}

std::string unfit_environment() {
  if (omp_get_max_threads() > kMaxThreads)
    return detail::concat("OMP_NUM_THREADS asks for ", omp_get_max_threads(), " threads, more than ",
                          kMaxThreads, "; set it to ", kMaxThreads, " or fewer");
  rlimit stack{};
  if (::getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY &&
      stack.rlim_cur < kMinStackBytes)
    return detail::concat("the stack limit (ulimit -s) is ", stack.rlim_cur >> 10, " KiB, less than the ",
                          kMinStackBytes >> 10, " KiB this program needs; raise it (ulimit -s ",
                          kMinStackBytes >> 10, " or more)");
  return "";
}

int check_stdout(int status, const char* program) {
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (flushed && !std::ferror(stdout)) return status;
  std::fprintf(stderr, "%s: writing the output to stdout failed%s%s\n", program, flushed ? "" : ": ",
               flushed ? "" : std::strerror(error));
  return status == 0 ? 1 : status;
}

}  // namespace gat::process
