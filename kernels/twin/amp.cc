#include "kernels/twin/amp.h"

#include "kernels/shared/amp_math.h"
#include "kernels/shared/rowwise.h"
#include "kernels/shared/rowwise_dispatch.h"
#include "kernels/shared/rowwise_tree.h"

namespace ampc::kernels::twin {

namespace sh = kernels::shared;

namespace {

// outs[j] = grads[j] * factor for every tensor (the kernels' scale_kernel); true when some
// gradient element is not finite.
bool scale_tensors(const char* what, int64_t num_tensors, const DType* dtypes,
                   const void* const* grads, void* const* outs, const int64_t* numels,
                   float factor) {
  bool found = false;
  for (int64_t j = 0; j < num_tensors; ++j) {
    sh::dispatch_float_types_f64(dtypes[j], what, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(grads[j]);
      T* y = static_cast<T*>(outs[j]);
      const auto f = static_cast<typename sh::Elem<T>::Math>(factor);
      for (int64_t i = 0; i < numels[j]; ++i) found |= sh::scale_element(x, y, i, f);
    });
  }
  return found;
}

}  // namespace

void unscale_check(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                   void* const* outs, const int64_t* numels, const void* inv_scale,
                   void* found_inf) {
  *static_cast<bool*>(found_inf) = scale_tensors("unscale_check", num_tensors, dtypes, grads, outs,
                                                 numels, *static_cast<const float*>(inv_scale));
}

void update_scale(const void* scale, const void* growth_tracker, const void* found_inf,
                  float growth_factor, float backoff_factor, int64_t growth_interval,
                  bool has_min_scale, float min_scale, bool has_max_scale, float max_scale,
                  void* new_scale, void* new_growth_tracker) {
  sh::check_growth_interval(growth_interval);
  const sh::ScaleUpdate r = sh::update_scale_value(
      *static_cast<const float*>(scale), *static_cast<const int32_t*>(growth_tracker),
      *static_cast<const bool*>(found_inf), growth_factor, backoff_factor, growth_interval,
      has_min_scale, min_scale, has_max_scale, max_scale);
  *static_cast<float*>(new_scale) = r.scale;
  *static_cast<int32_t*>(new_growth_tracker) = r.tracker;
}

// Workspace: the chunks' sums of squares (tensor by tensor), the tensors' squared norms, then
// the clip coefficient (fp32).
void clip_grad_norm(int64_t num_tensors, const DType* dtypes, const void* const* grads,
                    void* const* outs, const int64_t* numels, bool has_max_norm, float max_norm,
                    void* total_norm, void* workspace) {
  double* partial = static_cast<double*>(workspace);
  int64_t first_chunk = 0;
  for (int64_t j = 0; j < num_tensors; ++j) first_chunk += sh::amp_chunks(numels[j]);
  double* norm_sq = partial + first_chunk;
  first_chunk = 0;
  for (int64_t j = 0; j < num_tensors; ++j) {
    sh::dispatch_float_types_f64(dtypes[j], "clip_grad_norm", [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(grads[j]);
      const int64_t chunks = sh::amp_chunks(numels[j]);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t start = c * sh::kAmpChunk;
        const int64_t len = numels[j] - start < sh::kAmpChunk ? numels[j] - start : sh::kAmpChunk;
        partial[first_chunk + c] = sh::row_reduce_host(
            sh::RowPlan{sh::kAmpThreads, 1}, len, 0.0,
            [&](double a, int64_t i) {
              return sh::add_square(a, static_cast<double>(sh::Elem<T>::load(x[start + i])));
            },
            sh::DoubleSumCombine());
      }
      norm_sq[j] = sh::tensor_norm_squared(partial + first_chunk, chunks);
      first_chunk += chunks;
    });
  }
  const float total = sh::total_norm_from(norm_sq, num_tensors);
  *static_cast<float*>(total_norm) = total;
  if (!has_max_norm) return;
  const float coef = sh::clip_coef(max_norm, total);
  scale_tensors("clip_grad_norm", num_tensors, dtypes, grads, outs, numels, coef);
}

}  // namespace ampc::kernels::twin
