// The loss scaler's kernels. Multi-tensor: the host splits the tensor list into tables of at
// most kAmpMaxTensorsPerLaunch tensors passed by value; a block handles one chunk of
// kAmpChunk elements of one tensor (it finds its tensor by scanning the table's chunk
// offsets). Nothing is read back: found_inf, the norms and the clip coefficient stay on the
// device.
#include "kernels/cuda/amp.h"

#include <string>

#include "kernels/shared/amp_math.h"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_device.h"
#include "kernels/shared/rowwise_dispatch.h"

namespace ampc::kernels::cuda {
namespace {

namespace sh = kernels::shared;
constexpr int kMax = sh::kAmpMaxTensorsPerLaunch;

struct TensorTable {
  int count;
  int64_t first_tensor;           // index of entry 0 in the whole list
  int64_t first_chunk[kMax + 1];  // chunk offsets within the table (entry count: total)
  int64_t global_chunk;           // chunk index of the table's first chunk in the whole list
  int64_t numel[kMax];
  const void* in[kMax];
  void* out[kMax];
  DType dtype[kMax];
};

__device__ int find_tensor(const TensorTable& t, int64_t chunk) {
  int j = 0;
  while (j + 1 < t.count && t.first_chunk[j + 1] <= chunk) ++j;
  return j;
}

// Calls f(T{}) for the element type of entry j (f32, f64, f16, bf16; checked on the host).
template <typename F>
__device__ void with_type(DType d, F f) {
  switch (d) {
    case DType::kFloat64:
      return f(double{});
    case DType::kFloat16:
      return f(Half{});
    case DType::kBFloat16:
      return f(BFloat16{});
    default:
      return f(float{});
  }
}

// UnscaleCheck (factor: inv_scale, found_inf set when some element is not finite) and
// ClipGradNorm's clipping (factor: the coefficient, found_inf null): out = in * factor.
__global__ void scale_kernel(TensorTable t, const float* factor, bool* found_inf) {
  const int64_t chunk = blockIdx.x;
  const int j = find_tensor(t, chunk);
  const int64_t start = (chunk - t.first_chunk[j]) * sh::kAmpChunk;
  const int64_t end = t.numel[j] < start + sh::kAmpChunk ? t.numel[j] : start + sh::kAmpChunk;
  bool bad = false;
  with_type(t.dtype[j], [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(t.in[j]);
    T* y = static_cast<T*>(t.out[j]);
    const auto f = static_cast<typename sh::Elem<T>::Math>(*factor);
    for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x)
      bad |= sh::scale_element(x, y, i, f);
  });
  // found_inf is the same for the whole block, so every thread or none reaches the barrier.
  if (found_inf && __syncthreads_or(bad) && threadIdx.x == 0) *found_inf = true;
}

__global__ void update_scale_kernel(const float* scale, const int32_t* tracker,
                                    const bool* found_inf, float growth, float backoff,
                                    int64_t interval, bool has_min, float min_scale, bool has_max,
                                    float max_scale, float* new_scale, int32_t* new_tracker) {
  const sh::ScaleUpdate r =
      sh::update_scale_value(*scale, *tracker, *found_inf, growth, backoff, interval, has_min,
                             min_scale, has_max, max_scale);
  *new_scale = r.scale;
  *new_tracker = r.tracker;
}

// Per chunk: the sum of squares in double, in rowwise_tree.h's order with RowPlan{256, 1}.
__global__ void clip_partial_kernel(TensorTable t, double* partial) {
  __shared__ double smem[sh::kWarpSize];
  const int64_t chunk = blockIdx.x;
  const int j = find_tensor(t, chunk);
  const int64_t start = (chunk - t.first_chunk[j]) * sh::kAmpChunk;
  const int64_t len = t.numel[j] - start < sh::kAmpChunk ? t.numel[j] - start : sh::kAmpChunk;
  double a = 0.0;
  with_type(t.dtype[j], [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(t.in[j]) + start;
    for (int64_t i = threadIdx.x; i < len; i += sh::kAmpThreads)
      a = sh::add_square(a, static_cast<double>(sh::Elem<T>::load(x[i])));
  });
  a = sh::block_tree(a, sh::kAmpThreads, smem, sh::DoubleSumCombine());
  if (threadIdx.x == 0) partial[t.global_chunk + chunk] = a;
}

// Per tensor (a thread each): its chunks' sums in order, then the squared fp32 norm.
__global__ void clip_norm_kernel(TensorTable t, const double* partial, double* norm_sq) {
  const int j = threadIdx.x;
  if (j >= t.count) return;
  norm_sq[t.first_tensor + j] = sh::tensor_norm_squared(partial + t.global_chunk + t.first_chunk[j],
                                                        t.first_chunk[j + 1] - t.first_chunk[j]);
}

__global__ void clip_total_kernel(const double* norm_sq, int64_t count, bool has_max_norm,
                                  float max_norm, float* total_norm, float* coef) {
  const float total = sh::total_norm_from(norm_sq, count);
  *total_norm = total;
  if (has_max_norm) *coef = sh::clip_coef(max_norm, total);
}

// Calls f(table, chunks in the table) for consecutive tables of the list; empty tensors are
// skipped (no chunk) but keep their index for norm_sq.
template <typename F>
void for_each_table(const char* what, int64_t num_tensors, const DType* dtypes,
                    const void* const* ins, void* const* outs, const int64_t* numels, F f) {
  int64_t global_chunk = 0;
  for (int64_t first = 0; first < num_tensors; first += kMax) {
    TensorTable t{};
    t.count = static_cast<int>(num_tensors - first < kMax ? num_tensors - first : kMax);
    t.first_tensor = first;
    t.global_chunk = global_chunk;
    int64_t chunks = 0;
    for (int e = 0; e < t.count; ++e) {
      const int64_t j = first + e;
      sh::dispatch_float_types_f64(dtypes[j], what, [](auto) {});
      if (numels[j] < 0) throw Error(std::string(what) + ": negative element count");
      t.first_chunk[e] = chunks;
      t.numel[e] = numels[j];
      t.in[e] = ins[j];
      t.out[e] = outs ? outs[j] : nullptr;
      t.dtype[e] = dtypes[j];
      chunks += sh::amp_chunks(numels[j]);
    }
    t.first_chunk[t.count] = chunks;
    f(t, chunks);
    global_chunk += chunks;
  }
}

}  // namespace

void unscale_check(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                   void* const* outs, const int64_t* numels, const void* inv_scale, void* found_inf,
                   cudaStream_t stream) {
  const char* what = "unscale_check";
  const cudaError_t e = cudaMemsetAsync(found_inf, 0, 1, stream);  // capturable as a memset node
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
  for_each_table(what, num_tensors, dtypes, grads, outs, numels,
                 [&](const TensorTable& t, int64_t chunks) {
                   if (chunks == 0) return;
                   scale_kernel<<<sh::grid_of(chunks, what), sh::kAmpThreads, 0, stream>>>(
                       t, static_cast<const float*>(inv_scale), static_cast<bool*>(found_inf));
                   sh::check_launch(what);
                 });
}

void update_scale(const void* scale, const void* growth_tracker, const void* found_inf,
                  float growth_factor, float backoff_factor, int64_t growth_interval,
                  bool has_min_scale, float min_scale, bool has_max_scale, float max_scale,
                  void* new_scale, void* new_growth_tracker, cudaStream_t stream) {
  sh::check_growth_interval(growth_interval);
  update_scale_kernel<<<1, 1, 0, stream>>>(
      static_cast<const float*>(scale), static_cast<const int32_t*>(growth_tracker),
      static_cast<const bool*>(found_inf), growth_factor, backoff_factor, growth_interval,
      has_min_scale, min_scale, has_max_scale, max_scale, static_cast<float*>(new_scale),
      static_cast<int32_t*>(new_growth_tracker));
  sh::check_launch("update_scale");
}

// Workspace: the chunks' sums of squares, the tensors' squared norms, the clip coefficient.
void clip_grad_norm(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                    void* const* outs, const int64_t* numels, bool has_max_norm, float max_norm,
                    void* total_norm, void* workspace, cudaStream_t stream) {
  const char* what = "clip_grad_norm";
  int64_t total_chunks = 0;
  for (int64_t j = 0; j < num_tensors; ++j) total_chunks += sh::amp_chunks(numels[j]);
  double* partial = static_cast<double*>(workspace);
  double* norm_sq = partial + total_chunks;
  float* coef = reinterpret_cast<float*>(norm_sq + num_tensors);
  for_each_table(what, num_tensors, dtypes, grads, has_max_norm ? outs : nullptr, numels,
                 [&](const TensorTable& t, int64_t chunks) {
                   if (chunks > 0) {
                     clip_partial_kernel<<<sh::grid_of(chunks, what), sh::kAmpThreads, 0, stream>>>(
                         t, partial);
                     sh::check_launch(what);
                   }
                   clip_norm_kernel<<<1, kMax, 0, stream>>>(t, partial, norm_sq);
                   sh::check_launch(what);
                 });
  clip_total_kernel<<<1, 1, 0, stream>>>(norm_sq, num_tensors, has_max_norm, max_norm,
                                         static_cast<float*>(total_norm), coef);
  sh::check_launch(what);
  if (!has_max_norm) return;
  for_each_table(
      what, num_tensors, dtypes, grads, outs, numels, [&](const TensorTable& t, int64_t chunks) {
        if (chunks == 0) return;
        scale_kernel<<<sh::grid_of(chunks, what), sh::kAmpThreads, 0, stream>>>(t, coef, nullptr);
        sh::check_launch(what);
      });
}

}  // namespace ampc::kernels::cuda
