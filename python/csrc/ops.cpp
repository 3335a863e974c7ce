// gat_torch's custom operators: the fused GAT kernels of framework/ops/ on PyTorch tensors.
//
// Every operator views its PyTorch tensors as gat::Tensors (Tensor::from_blob: no copy), makes
// its outputs with PyTorch's allocator, and calls the kernels:: entry points that gat's own ops
// call. On CUDA it runs on torch.cuda.current_stream(), and the kernels' scratch memory comes from
// PyTorch's caching allocator (cuda::UseExternal): one memory pool in the process, no host
// synchronisation. Autograd and the fake (meta) implementations are registered in Python
// (python/gat_torch/ops.py). A graph travels as the twelve index arrays of gat::Graph and five
// counts (Graph::from_arrays), as build_graph makes them.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "gat/framework/cuda_runtime.h"
#include "gat/framework/graph.h"
#include "gat/framework/ops/attention/csr_softmax_aggregate.h"
#include "gat/framework/ops/attention/gat_edge_scores.h"
#include "gat/framework/ops/attention/gatv2_attention_aggregate.h"
#include "gat/framework/ops/attention/head_dot.h"
#include "gat/framework/rng.h"

#if GAT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gat_torch {
namespace {

using gat::Device;
using gat::DType;

// ---- PyTorch tensors as gat tensors ----

DType gat_dtype(const at::Tensor& t, const char* op, const char* arg) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DType::f32;
    case at::kDouble:
      return DType::f64;
    case at::kInt:
      return DType::i32;
    default:
      break;
  }
  TORCH_CHECK(false, "gat_torch.", op, ": '", arg, "' is ", t.scalar_type(),
              "; expected float32, float64 (or int32 for indices)");
}

Device gat_device(const at::Tensor& t, const char* op, const char* arg) {
  if (t.is_cpu()) return Device::cpu;
  TORCH_CHECK(t.is_cuda(), "gat_torch.", op, ": '", arg, "' is on ", t.device(), "; expected cpu or cuda");
  TORCH_CHECK(t.get_device() == 0, "gat_torch.", op, ": '", arg, "' is on ", t.device(),
              "; gat's CUDA kernels run on cuda:0 only");
  return Device::cuda;
}

// A gat::Tensor over t's memory (t made contiguous; a CPU tensor whose data is not 64-byte
// aligned, as gat's vectorised CPU loops expect, is copied into one that is). The view keeps the
// PyTorch tensor alive.
gat::Tensor view(const at::Tensor& tensor, const char* op, const char* arg) {
  at::Tensor t = tensor.contiguous();
  if (t.is_cpu() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 != 0) t = t.clone();
  gat::Shape shape(t.sizes().begin(), t.sizes().end());
  const DType dtype = gat_dtype(t, op, arg);
  const Device device = gat_device(t, op, arg);
  void* data = t.data_ptr();
  return gat::Tensor::from_blob(data, shape, dtype, device, std::make_shared<at::Tensor>(std::move(t)));
}

gat::Tensor view_or_undefined(const std::optional<at::Tensor>& t, const char* op, const char* arg) {
  return t.has_value() && t->defined() ? view(*t, op, arg) : gat::Tensor();
}

// An output made by PyTorch, and the gat view a kernel writes it through.
struct Output {
  at::Tensor torch;
  gat::Tensor gat;
  Output(at::IntArrayRef sizes, const at::TensorOptions& options, const char* op, const char* arg)
      : torch(at::empty(sizes, options)), gat(view(torch, op, arg)) {}
  gat::Tensor* ptr() { return &gat; }
};

#if GAT_WITH_CUDA
// PyTorch's caching allocator on its current stream (the stream UseExternal installs).
class TorchCudaAllocator final : public gat::cuda::ExternalAllocator {
 public:
  void* allocate(size_t bytes) override { return c10::cuda::CUDACachingAllocator::raw_alloc(bytes); }
  void deallocate(void* ptr) noexcept override { c10::cuda::CUDACachingAllocator::raw_delete(ptr); }
};
#endif

// While it lives, gat's CUDA work for tensors on `device` goes to PyTorch's current stream and
// memory (nothing for CPU tensors).
class OnTorchStream {
 public:
  explicit OnTorchStream(const at::Tensor& on) {
#if GAT_WITH_CUDA
    if (!on.is_cuda()) return;
    TORCH_CHECK(gat::cuda::available(), "gat_torch: gat's CUDA runtime is not available (",
                gat::cuda::unavailable_reason(), ")");
    static TorchCudaAllocator allocator;
    guard_.emplace(on.device());
    use_.emplace(c10::cuda::getCurrentCUDAStream(on.get_device()).stream(), &allocator);
#else
    TORCH_CHECK(!on.is_cuda(), "gat_torch: this build of gat has no CUDA backend");
#endif
  }

 private:
#if GAT_WITH_CUDA
  std::optional<c10::cuda::CUDAGuard> guard_;
  std::optional<gat::cuda::UseExternal> use_;
#endif
};

// gat's errors become PyTorch's (RuntimeError in Python) with gat's message.
template <class F>
decltype(auto) translate_errors(F&& f) {
  try {
    return f();
  } catch (const gat::Error& e) {
    TORCH_CHECK(false, e.what());
  }
}

// ---- graphs ----

constexpr size_t kGraphArrays = 12;
constexpr int64_t kGraphCounts = 5;  // max_in_degree, max_out_degree, chunk_edges, self loops, one per node

gat::Graph graph_of(const std::vector<at::Tensor>& arrays, at::IntArrayRef counts, const char* op) {
  TORCH_CHECK(arrays.size() == kGraphArrays && static_cast<int64_t>(counts.size()) == kGraphCounts,
              "gat_torch.", op, ": a graph is ", kGraphArrays, " arrays and ", kGraphCounts,
              " counts (gat_torch.Graph makes them), got ", arrays.size(), " and ", counts.size());
  gat::GraphArrays a;
  gat::Tensor* fields[kGraphArrays] = {&a.row_ptr,
                                       &a.edge_src,
                                       &a.edge_dst,
                                       &a.t_row_ptr,
                                       &a.t_edge_dst,
                                       &a.t_edge_id,
                                       &a.plans.row_chunk_ptr,
                                       &a.plans.t_row_chunk_ptr,
                                       &a.plans.row_chunk_row,
                                       &a.plans.t_row_chunk_row,
                                       &a.plans.row_order,
                                       &a.plans.t_row_order};
  for (size_t k = 0; k < kGraphArrays; ++k) {
    TORCH_CHECK(arrays[k].scalar_type() == at::kInt && arrays[k].dim() == 1, "gat_torch.", op,
                ": graph array ", k, " must be a 1-D int32 tensor, got ", arrays[k].scalar_type(), " ",
                arrays[k].sizes());
    *fields[k] = view(arrays[k], op, "graph");
  }
  a.num_dst_nodes = a.row_ptr.numel() - 1;
  a.num_src_nodes = a.t_row_ptr.numel() - 1;
  a.plans.max_in_degree = counts[0];
  a.plans.max_out_degree = counts[1];
  a.plans.chunk_edges = static_cast<int>(counts[2]);
  a.plans.num_row_chunks = a.plans.row_chunk_row.numel();
  a.plans.num_t_row_chunks = a.plans.t_row_chunk_row.numel();
  a.num_self_loops = counts[3];
  a.one_self_loop_per_node = counts[4] != 0;
  return gat::Graph::from_arrays(std::move(a));
}

// Checks a graph made from arrays the caller gives (gat_torch.Graph(arrays, counts, perm)): every
// invariant of gat::Graph (Graph::validate, on host copies), the counts as build_graph makes them,
// and perm a permutation of the edge ids, (E,) int64 on the arrays' device. The operators trust a
// graph's arrays: a bad one read memory out of bounds (a crash, or wrong results).
void validate_graph(const std::vector<at::Tensor>& arrays, at::IntArrayRef counts, const at::Tensor& perm) {
  const char* op = "Graph";
  TORCH_CHECK(arrays.size() == kGraphArrays, "gat_torch.", op, ": a graph is ", kGraphArrays, " arrays, got ",
              arrays.size());
  for (const size_t k :
       {size_t{0}, size_t{3}})  // row_ptr and t_row_ptr: the node counts are their lengths - 1
    TORCH_CHECK(arrays[k].numel() >= 1, "gat_torch.", op, ": graph array ", k,
                " (row pointers, N + 1) must have at least one element, got ", arrays[k].sizes());
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == kGraphCounts && counts[2] >= 0 &&
                  counts[2] <= INT32_MAX && (counts[4] == 0 || counts[4] == 1),
              "gat_torch.", op,
              ": counts must be five integers (max in-degree, max out-degree, chunk edges "
              "in [0, 2^31 - 1], self loops, one per node 0 or 1), got ",
              counts);
  const gat::Graph graph = graph_of(arrays, counts, op);
  try {
    graph.validate();
  } catch (const gat::Error& e) {
    TORCH_CHECK(false, "gat_torch.", op, ": the arrays are not a graph: ", e.what());
  }
  const int64_t e = graph.num_edges();
  TORCH_CHECK(perm.scalar_type() == at::kLong && perm.dim() == 1 && perm.numel() == e &&
                  perm.device() == arrays[0].device(),
              "gat_torch.", op, ": perm must be a 1-D int64 tensor of the ", e, " edges on ",
              arrays[0].device(), ", got ", perm.scalar_type(), " ", perm.sizes(), " on ", perm.device());
  const at::Tensor host = perm.cpu().contiguous();
  const int64_t* p = host.data_ptr<int64_t>();
  std::vector<char> seen(static_cast<size_t>(e), 0);
  for (int64_t k = 0; k < e; ++k) {
    TORCH_CHECK(p[k] >= 0 && p[k] < e && !seen[static_cast<size_t>(p[k])], "gat_torch.", op, ": perm[", k,
                "] is ", p[k], (p[k] >= 0 && p[k] < e ? ", named twice" : ", outside [0, E)"),
                "; perm must be a permutation of the ", e, " edge ids");
    seen[static_cast<size_t>(p[k])] = 1;
  }
}

// row_ptr (n+1,) int32 of `sorted` (E,) int64 row ids in ascending order: where each row starts.
at::Tensor row_pointers(const at::Tensor& sorted, int64_t n) {
  return at::searchsorted(sorted, at::arange(n + 1, sorted.options())).to(at::kInt);
}

at::Tensor host_to(const gat::Tensor& t, const at::Device& device) {
  at::Tensor host = at::empty({t.numel()}, at::TensorOptions().dtype(at::kInt));
  std::copy_n(t.data<int32_t>(), t.numel(), host.data_ptr<int32_t>());
  return host.to(device);
}

// The CSR by destination of the edges src[k] -> dst[k] (duplicates and self loops kept, as
// listed), sorted on their device, with its transpose and plans (gat::plan_rows, on the host from
// the two row-pointer arrays). Returns the graph's 12 arrays, then perm (E,) int64 (CSR edge k is
// input edge perm[k]), then its 5 counts (int64, on the CPU).
std::vector<at::Tensor> build_graph(const at::Tensor& src, const at::Tensor& dst, int64_t num_src,
                                    int64_t num_dst) {
  const char* op = "build_graph";
  TORCH_CHECK(src.dim() == 1 && dst.dim() == 1 && src.numel() == dst.numel(), "gat_torch.", op,
              ": src and dst must be 1-D of one length, got ", src.sizes(), " and ", dst.sizes());
  TORCH_CHECK(!at::isFloatingType(src.scalar_type()) && !at::isFloatingType(dst.scalar_type()) &&
                  src.scalar_type() != at::kBool && dst.scalar_type() != at::kBool,
              "gat_torch.", op, ": node indices must be integers, got ", src.scalar_type(), " and ",
              dst.scalar_type());
  TORCH_CHECK(src.device() == dst.device(), "gat_torch.", op, ": src is on ", src.device(), " and dst on ",
              dst.device());
  constexpr int64_t kMax = INT32_MAX;
  TORCH_CHECK(num_src >= 0 && num_dst >= 0 && num_src <= kMax && num_dst <= kMax, "gat_torch.", op,
              ": node counts must be in [0, 2^31 - 1], got ", num_src, " sources and ", num_dst,
              " destinations");
  const int64_t E = src.numel();
  TORCH_CHECK(E <= kMax, "gat_torch.", op, ": ", E, " edges; gat's edge ids are 32-bit (at most 2^31 - 1)");
  gat_device(src, op, "src");
  at::Tensor s = src.to(at::kLong), d = dst.to(at::kLong);
  if (E > 0) {
    const auto [smin, smax] = at::aminmax(s);
    const auto [dmin, dmax] = at::aminmax(d);
    const int64_t lo_s = smin.item<int64_t>(), hi_s = smax.item<int64_t>();
    const int64_t lo_d = dmin.item<int64_t>(), hi_d = dmax.item<int64_t>();
    TORCH_CHECK(lo_s >= 0 && hi_s < num_src, "gat_torch.", op, ": source indices span [", lo_s, ", ", hi_s,
                "], outside [0, ", num_src, ")");
    TORCH_CHECK(lo_d >= 0 && hi_d < num_dst, "gat_torch.", op, ": destination indices span [", lo_d, ", ",
                hi_d, "], outside [0, ", num_dst, ")");
  }
  // By destination, then source; a stable sort keeps duplicates in input order.
  const at::Tensor perm =
      std::get<1>((d * num_src + s).sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor edge_src = s.index_select(0, perm), edge_dst = d.index_select(0, perm);
  const at::Tensor row_ptr = row_pointers(edge_dst, num_dst);
  // The transpose: by source, then destination, then edge id (stable over the CSR order).
  const at::Tensor t_perm =
      std::get<1>((edge_src * num_dst + edge_dst).sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor t_row_ptr = row_pointers(edge_src.index_select(0, t_perm), num_src);

  const at::Tensor row_ptr_host = row_ptr.cpu(), t_row_ptr_host = t_row_ptr.cpu();
  const gat::RowPlans plans = translate_errors([&] {
    return gat::plan_rows(E, view(row_ptr_host, op, "row_ptr"), view(t_row_ptr_host, op, "t_row_ptr"));
  });
  // Self loops (i, i) with i < min(Ns, Nd): how many, and whether every such node has exactly one.
  const at::Tensor is_loop = edge_src == edge_dst;
  const int64_t loops = is_loop.sum().item<int64_t>();
  const int64_t loop_nodes = std::min(num_src, num_dst);
  bool one_per_node = loops == loop_nodes;
  if (one_per_node && loops > 0)
    one_per_node = std::get<0>(at::unique_consecutive(edge_dst.masked_select(is_loop))).numel() == loop_nodes;

  const at::Device device = src.device();
  std::vector<at::Tensor> out = {
      row_ptr,
      edge_src.to(at::kInt),
      edge_dst.to(at::kInt),
      t_row_ptr,
      edge_dst.index_select(0, t_perm).to(at::kInt),
      t_perm.to(at::kInt),
      host_to(plans.row_chunk_ptr, device),
      host_to(plans.t_row_chunk_ptr, device),
      host_to(plans.row_chunk_row, device),
      host_to(plans.t_row_chunk_row, device),
      host_to(plans.row_order, device),
      host_to(plans.t_row_order, device),
      perm,
      at::tensor(std::vector<int64_t>{plans.max_in_degree, plans.max_out_degree, plans.chunk_edges, loops,
                                      one_per_node ? 1 : 0})};
  return out;
}

// ---- the attention ops ----

// The dropout seed is a one-element int64 CPU tensor (drawn by torch.randint, so that
// torch.compile traces the draw; reading it needs no device synchronisation); None without dropout.
gat::DropoutKey dropout_key(double p, const std::optional<at::Tensor>& seed, const char* op) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "gat_torch.", op, ": dropout must be in [0, 1), got ", p);
  gat::DropoutKey key;
  key.p = static_cast<float>(p);
  if (p == 0.0) return key;
  TORCH_CHECK(seed.has_value() && seed->defined(), "gat_torch.", op, ": dropout ", p, " needs a seed");
  TORCH_CHECK(seed->is_cpu() && seed->scalar_type() == at::kLong && seed->numel() == 1, "gat_torch.", op,
              ": 'seed' must be one int64 on the CPU, got ", seed->scalar_type(), " ", seed->sizes(), " on ",
              seed->device());
  key.seed = static_cast<uint64_t>(seed->item<int64_t>());
  return key;
}

// The tensors of one call must share a dtype and a device.
void check_like(const at::Tensor& t, const at::Tensor& like, const char* op, const char* arg) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.device() == like.device(), "gat_torch.", op, ": '",
              arg, "' is ", t.scalar_type(), " on ", t.device(), ", unlike the others (", like.scalar_type(),
              " on ", like.device(), ")");
}

// A backward's grad_out: like the forward's inputs, and of its output's shape.
void check_grad_out(const at::Tensor& grad_out, const at::Tensor& like, const at::Tensor& out,
                    const char* op) {
  check_like(grad_out, like, op, "grad_out");
  TORCH_CHECK(grad_out.sizes() == out.sizes(), "gat_torch.", op, ": grad_out ", grad_out.sizes(),
              " must have the output's shape ", out.sizes());
}

// A backward's gradient of `like` where it is needed, else an empty tensor.
Output gradient(bool need, const at::Tensor& like, const char* op, const char* arg) {
  return Output(need ? like.sizes() : at::IntArrayRef{0}, like.options(), op, arg);
}

// An attention backward's four gradients: gradient i is like *like[i] where needs[i], else empty.
struct Gradients {
  std::array<bool, 4> needs;
  std::array<Output, 4> d;
  Gradients(std::array<bool, 4> needs_, std::array<const at::Tensor*, 4> like,
            std::array<const char*, 4> names, const char* op)
      : needs(needs_),
        d{gradient(needs[0], *like[0], op, names[0]), gradient(needs[1], *like[1], op, names[1]),
          gradient(needs[2], *like[2], op, names[2]), gradient(needs[3], *like[3], op, names[3])} {}
  // Where the kernel writes gradient i: null where it is not needed.
  gat::Tensor* ptr(size_t i) { return needs[i] ? d[i].ptr() : nullptr; }
  std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> torch() const {
    return std::make_tuple(d[0].torch, d[1].torch, d[2].torch, d[3].torch);
  }
};

// An attention backward's saved forward results and upstream gradient, viewed into its arguments.
template <class BackwardArgs>
void view_saved(BackwardArgs& a, const at::Tensor& out, const at::Tensor& lse, const at::Tensor& grad_out,
                const char* op) {
  a.out = view(out, op, "out");
  a.lse = view(lse, op, "lse");
  a.grad_out = view(grad_out, op, "grad_out");
}

// (out, lse, pos_out, pos_weight); the last two are the forward's sums that CUDA's backward takes
// d er from (with_positive), empty otherwise.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> gat_attention(
    const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts, const at::Tensor& el,
    const at::Tensor& er, const std::optional<at::Tensor>& edge_term, const at::Tensor& value,
    double negative_slope, double dropout, const std::optional<at::Tensor>& seed, bool with_positive) {
  const char* op = "gat_attention";
  check_like(er, el, op, "er");
  check_like(value, el, op, "value");
  if (edge_term) check_like(*edge_term, el, op, "edge_term");
  TORCH_CHECK(value.dim() == 3, "gat_torch.", op, ": 'value' must be (Ns, H, F), got ", value.sizes());
  OnTorchStream on(el);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    const gat::Tensor l = view(el, op, "el"), r = view(er, op, "er");
    const gat::Tensor term = view_or_undefined(edge_term, op, "edge_term"), v = view(value, op, "value");
    gat::ops::check_gat_score_terms(op, graph, l, r, term);
    GAT_CHECK(v.size(0) == graph.num_src_nodes() && v.size(1) == l.size(1), op, ": 'value' ", v.describe(),
              " must be (Ns, H, F) with Ns = ", graph.num_src_nodes(), " and H = ", l.size(1));
    const int64_t Nd = graph.num_dst_nodes(), H = l.size(1), F = v.size(2);
    Output out({Nd, H, F}, value.options(), op, "out"), lse({Nd, H}, value.options(), op, "lse");
    const bool positive = with_positive && value.is_cuda();
    Output pos_out(positive ? at::IntArrayRef{Nd, H, F} : at::IntArrayRef{0}, value.options(), op, "pos_out");
    Output pos_weight(positive ? at::IntArrayRef{Nd, H} : at::IntArrayRef{0}, value.options(), op,
                      "pos_weight");
    gat::ops::GatAttentionForwardArgs a{
        {&graph, l, r, term, v, negative_slope, dropout_key(dropout, seed, op)}};
    a.out = out.ptr();
    a.lse = lse.ptr();
    a.pos_out = positive ? pos_out.ptr() : nullptr;
    a.pos_weight = positive ? pos_weight.ptr() : nullptr;
    gat::ops::kernels::gat_attention_aggregate_forward(a);
    return std::make_tuple(out.torch, lse.torch, pos_out.torch, pos_weight.torch);
  });
}

// (d el, d er, d edge_term, d value); an output that `needs` does not ask for is empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> gat_attention_backward(
    const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts, const at::Tensor& el,
    const at::Tensor& er, const std::optional<at::Tensor>& edge_term, const at::Tensor& value,
    double negative_slope, double dropout, const std::optional<at::Tensor>& seed, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& pos_out, const at::Tensor& pos_weight,
    const at::Tensor& grad_out, std::array<bool, 4> needs) {
  const char* op = "gat_attention_backward";
  check_grad_out(grad_out, el, out, op);
  needs[2] = needs[2] && edge_term.has_value();
  OnTorchStream on(el);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    Gradients d(needs, {&el, &er, needs[2] ? &*edge_term : &el, &value},
                {"grad_el", "grad_er", "grad_edge_term", "grad_value"}, op);
    gat::ops::GatAttentionBackwardArgs a{
        {&graph, view(el, op, "el"), view(er, op, "er"), view_or_undefined(edge_term, op, "edge_term"),
         view(value, op, "value"), negative_slope, dropout_key(dropout, seed, op)}};
    view_saved(a, out, lse, grad_out, op);
    if (pos_out.numel()) a.pos_out = view(pos_out, op, "pos_out");
    if (pos_weight.numel()) a.pos_weight = view(pos_weight, op, "pos_weight");
    a.grad_el = d.ptr(0);
    a.grad_er = d.ptr(1);
    a.grad_edge_term = d.ptr(2);
    a.grad_value = d.ptr(3);
    gat::ops::kernels::gat_attention_aggregate_backward(a);
    return d.torch();
  });
}

// GATv2's score inputs: xr, att and edge_term must be like xl.
void check_gatv2_like(const at::Tensor& xl, const at::Tensor& xr, const at::Tensor& att,
                      const std::optional<at::Tensor>& edge_term, const char* op) {
  check_like(xr, xl, op, "xr");
  check_like(att, xl, op, "att");
  if (edge_term) check_like(*edge_term, xl, op, "edge_term");
}

// GATv2's score inputs viewed as gat tensors and checked against the graph.
gat::ops::Gatv2ScoreInputs gatv2_score_inputs(const gat::Graph& graph, const at::Tensor& xl,
                                              const at::Tensor& xr, const at::Tensor& att,
                                              const std::optional<at::Tensor>& edge_term,
                                              double negative_slope, const char* op) {
  const gat::Tensor l = view(xl, op, "xl"), r = view(xr, op, "xr"), a = view(att, op, "att");
  const gat::Tensor term = view_or_undefined(edge_term, op, "edge_term");
  gat::ops::check_gatv2_inputs(op, graph, l, r, a, negative_slope, term);
  return {&graph, l, r, a, negative_slope, term};
}

// (out, lse)
std::tuple<at::Tensor, at::Tensor> gatv2_attention(const std::vector<at::Tensor>& graph_arrays,
                                                   at::IntArrayRef graph_counts, const at::Tensor& xl,
                                                   const at::Tensor& xr, const at::Tensor& att,
                                                   const std::optional<at::Tensor>& edge_term,
                                                   double negative_slope, double dropout,
                                                   const std::optional<at::Tensor>& seed) {
  const char* op = "gatv2_attention";
  check_gatv2_like(xl, xr, att, edge_term, op);
  OnTorchStream on(xl);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    const gat::ops::Gatv2ScoreInputs inputs =
        gatv2_score_inputs(graph, xl, xr, att, edge_term, negative_slope, op);
    const int64_t Nd = graph.num_dst_nodes(), H = xl.size(1), F = xl.size(2);
    Output out({Nd, H, F}, xl.options(), op, "out"), lse({Nd, H}, xl.options(), op, "lse");
    gat::ops::Gatv2AttentionForwardArgs args{{inputs, dropout_key(dropout, seed, op)}};
    args.out = out.ptr();
    args.lse = lse.ptr();
    gat::ops::kernels::gatv2_attention_aggregate_forward(args);
    return std::make_tuple(out.torch, lse.torch);
  });
}

// (d xl, d xr, d att, d edge_term); an output that `needs` does not ask for is empty.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> gatv2_attention_backward(
    const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts, const at::Tensor& xl,
    const at::Tensor& xr, const at::Tensor& att, const std::optional<at::Tensor>& edge_term,
    double negative_slope, double dropout, const std::optional<at::Tensor>& seed, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& grad_out, std::array<bool, 4> needs) {
  const char* op = "gatv2_attention_backward";
  check_grad_out(grad_out, xl, out, op);
  needs[3] = needs[3] && edge_term.has_value();
  OnTorchStream on(xl);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    Gradients d(needs, {&xl, &xr, &att, needs[3] ? &*edge_term : &xl},
                {"grad_xl", "grad_xr", "grad_att", "grad_edge_term"}, op);
    gat::ops::Gatv2AttentionBackwardArgs a{
        {{&graph, view(xl, op, "xl"), view(xr, op, "xr"), view(att, op, "att"), negative_slope,
          view_or_undefined(edge_term, op, "edge_term")},
         dropout_key(dropout, seed, op)}};
    view_saved(a, out, lse, grad_out, op);
    a.grad_xl = d.ptr(0);
    a.grad_xr = d.ptr(1);
    a.grad_att = d.ptr(2);
    a.grad_edge_term = d.ptr(3);
    gat::ops::kernels::gatv2_attention_aggregate_backward(a);
    return d.torch();
  });
}

// GAT's el and er from one projection x (N, H, F) in one pass: (N, H) each,
//   el[n,h] = sum_f x[n,h,f] a_src[h,f],  er[n,h] = sum_f x[n,h,f] a_dst[h,f].
void check_head_dot_pair(const at::Tensor& x, const at::Tensor& a_src, const at::Tensor& a_dst,
                         const char* op) {
  check_like(a_src, x, op, "a_src");
  check_like(a_dst, x, op, "a_dst");
  TORCH_CHECK(x.dim() == 3 && a_src.dim() == 2 && a_src.size(0) == x.size(1) && a_src.size(1) == x.size(2) &&
                  a_dst.sizes() == a_src.sizes(),
              "gat_torch.", op, ": x (N, H, F) ", x.sizes(), ", a_src and a_dst (H, F) ", a_src.sizes(),
              " and ", a_dst.sizes());
}

std::tuple<at::Tensor, at::Tensor> head_dot_pair(const at::Tensor& x, const at::Tensor& a_src,
                                                 const at::Tensor& a_dst) {
  const char* op = "head_dot_pair";
  check_head_dot_pair(x, a_src, a_dst, op);
  OnTorchStream on(x);
  return translate_errors([&] {
    Output el({x.size(0), x.size(1)}, x.options(), op, "el"),
        er({x.size(0), x.size(1)}, x.options(), op, "er");
    gat::KeepMask no_dropout;
    gat::ops::kernels::head_dot_pair_dropout_forward(view(x, op, "x"), view(a_src, op, "a_src"),
                                                     view(a_dst, op, "a_dst"), gat::DropoutKey{}, 1.0,
                                                     no_dropout, el.gat, er.gat, nullptr, nullptr);
    return std::make_tuple(el.torch, er.torch);
  });
}

// (d x, d a_src, d a_dst) for d el and d er (N, H); d a sums over the nodes in a fixed order.
std::tuple<at::Tensor, at::Tensor, at::Tensor> head_dot_pair_backward(const at::Tensor& x,
                                                                      const at::Tensor& a_src,
                                                                      const at::Tensor& a_dst,
                                                                      const at::Tensor& grad_el,
                                                                      const at::Tensor& grad_er) {
  const char* op = "head_dot_pair_backward";
  check_head_dot_pair(x, a_src, a_dst, op);
  for (const at::Tensor* g : {&grad_el, &grad_er}) {
    check_like(*g, x, op, "grad_el, grad_er");
    TORCH_CHECK(g->dim() == 2 && g->size(0) == x.size(0) && g->size(1) == x.size(1), "gat_torch.", op,
                ": grad_el and grad_er must be (N, H) = (", x.size(0), ", ", x.size(1), "), got ",
                g->sizes());
  }
  OnTorchStream on(x);
  return translate_errors([&] {
    const gat::Tensor xv = view(x, op, "x"), src = view(a_src, op, "a_src"), dst = view(a_dst, op, "a_dst");
    const gat::Tensor g_el = view(grad_el, op, "grad_el"), g_er = view(grad_er, op, "grad_er");
    at::Tensor grad_x = at::zeros_like(x, at::MemoryFormat::Contiguous);
    gat::Tensor grad_x_view = view(grad_x, op, "grad_x");
    gat::KeepMask no_dropout;  // grad_x = 0 + d el a_src + d er a_dst
    gat::ops::kernels::head_dot_pair_grad_x(grad_x_view, gat::DropoutKey{}, 1.0, no_dropout, src, g_el, dst,
                                            g_er, grad_x_view);
    Output d_src(a_src.sizes(), a_src.options(), op, "grad_a_src"),
        d_dst(a_dst.sizes(), a_dst.options(), op, "grad_a_dst");
    gat::ops::kernels::head_dot_pair_grad_a(xv, g_el, g_er, d_src.gat, d_dst.gat);
    return std::make_tuple(grad_x, d_src.torch, d_dst.torch);
  });
}

// GAT's edge scores (E, H) in CSR order (for the attention weights).
at::Tensor gat_edge_scores(const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts,
                           const at::Tensor& el, const at::Tensor& er,
                           const std::optional<at::Tensor>& edge_term, double negative_slope) {
  const char* op = "gat_edge_scores";
  check_like(er, el, op, "er");
  if (edge_term) check_like(*edge_term, el, op, "edge_term");
  OnTorchStream on(el);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    const gat::Tensor l = view(el, op, "el"), r = view(er, op, "er");
    const gat::Tensor term = view_or_undefined(edge_term, op, "edge_term");
    gat::ops::check_gat_score_terms(op, graph, l, r, term);
    Output scores({graph.num_edges(), el.size(1)}, el.options(), op, "scores");
    gat::ops::kernels::gat_edge_scores_forward(graph, l, r, term, negative_slope, scores.gat);
    return scores.torch;
  });
}

// GATv2's edge scores (E, H) in CSR order.
at::Tensor gatv2_edge_scores(const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts,
                             const at::Tensor& xl, const at::Tensor& xr, const at::Tensor& att,
                             const std::optional<at::Tensor>& edge_term, double negative_slope) {
  const char* op = "gatv2_edge_scores";
  check_gatv2_like(xl, xr, att, edge_term, op);
  OnTorchStream on(xl);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    gat::ops::Gatv2EdgeScoresArgs args{gatv2_score_inputs(graph, xl, xr, att, edge_term, negative_slope, op)};
    Output scores({graph.num_edges(), xl.size(1)}, xl.options(), op, "scores");
    args.scores = scores.ptr();
    gat::ops::kernels::gatv2_edge_scores(args);
    return scores.torch;
  });
}

// The row softmax (E, H) of edge scores (E, H) in CSR order.
at::Tensor csr_softmax(const std::vector<at::Tensor>& graph_arrays, at::IntArrayRef graph_counts,
                       const at::Tensor& scores) {
  const char* op = "csr_softmax";
  OnTorchStream on(scores);
  return translate_errors([&] {
    const gat::Graph graph = graph_of(graph_arrays, graph_counts, op);
    const gat::Tensor s = view(scores, op, "scores");
    GAT_CHECK(s.dim() == 2 && s.size(0) == graph.num_edges(), op, ": 'scores' ", s.describe(),
              " must be (E, H) with E = ", graph.num_edges());
    Output weights(scores.sizes(), scores.options(), op, "weights");
    gat::ops::CsrSoftmaxArgs args{&graph, s, weights.ptr()};
    gat::ops::kernels::csr_softmax(args);
    return weights.torch;
  });
}

}  // namespace
}  // namespace gat_torch

// Schemas: Tensor[] graph and int[] graph_counts are a gat_torch.Graph (python/gat_torch/ops.py).
TORCH_LIBRARY(gat_torch, m) {
  m.def("build_graph(Tensor src, Tensor dst, int num_src, int num_dst) -> Tensor[]");
  m.def("validate_graph(Tensor[] graph, int[] graph_counts, Tensor perm) -> ()");
  m.def(
      "gat_attention(Tensor[] graph, int[] graph_counts, Tensor el, Tensor er, Tensor? edge_term, "
      "Tensor value, float negative_slope, float dropout, Tensor? seed, bool with_positive) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "gat_attention_backward(Tensor[] graph, int[] graph_counts, Tensor el, Tensor er, "
      "Tensor? edge_term, Tensor value, float negative_slope, float dropout, Tensor? seed, Tensor out, "
      "Tensor lse, Tensor pos_out, Tensor pos_weight, Tensor grad_out, bool[4] needs) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "gatv2_attention(Tensor[] graph, int[] graph_counts, Tensor xl, Tensor xr, Tensor att, "
      "Tensor? edge_term, float negative_slope, float dropout, Tensor? seed) -> (Tensor, Tensor)");
  m.def(
      "gatv2_attention_backward(Tensor[] graph, int[] graph_counts, Tensor xl, Tensor xr, "
      "Tensor att, Tensor? edge_term, float negative_slope, float dropout, Tensor? seed, Tensor out, "
      "Tensor lse, Tensor grad_out, bool[4] needs) -> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "gat_edge_scores(Tensor[] graph, int[] graph_counts, Tensor el, Tensor er, Tensor? edge_term, "
      "float negative_slope) -> Tensor");
  m.def(
      "gatv2_edge_scores(Tensor[] graph, int[] graph_counts, Tensor xl, Tensor xr, Tensor att, "
      "Tensor? edge_term, float negative_slope) -> Tensor");
  m.def("csr_softmax(Tensor[] graph, int[] graph_counts, Tensor scores) -> Tensor");
  m.def("head_dot_pair(Tensor x, Tensor a_src, Tensor a_dst) -> (Tensor, Tensor)");
  m.def(
      "head_dot_pair_backward(Tensor x, Tensor a_src, Tensor a_dst, Tensor grad_el, Tensor grad_er) "
      "-> (Tensor, Tensor, Tensor)");
}

// One implementation serves CPU and CUDA: gat's kernels:: choose by the tensors' device.
#define GAT_TORCH_IMPLS(m)                                                  \
  m.impl("build_graph", &gat_torch::build_graph);                           \
  m.impl("validate_graph", &gat_torch::validate_graph);                     \
  m.impl("gat_attention", &gat_torch::gat_attention);                       \
  m.impl("gat_attention_backward", &gat_torch::gat_attention_backward);     \
  m.impl("gatv2_attention", &gat_torch::gatv2_attention);                   \
  m.impl("gatv2_attention_backward", &gat_torch::gatv2_attention_backward); \
  m.impl("gat_edge_scores", &gat_torch::gat_edge_scores);                   \
  m.impl("gatv2_edge_scores", &gat_torch::gatv2_edge_scores);               \
  m.impl("csr_softmax", &gat_torch::csr_softmax);                           \
  m.impl("head_dot_pair", &gat_torch::head_dot_pair);                       \
  m.impl("head_dot_pair_backward", &gat_torch::head_dot_pair_backward)
TORCH_LIBRARY_IMPL(gat_torch, CPU, m) { GAT_TORCH_IMPLS(m); }
TORCH_LIBRARY_IMPL(gat_torch, CUDA, m) { GAT_TORCH_IMPLS(m); }
