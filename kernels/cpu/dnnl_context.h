// The CPU backend's oneDNN (Debian's libdnnl, 2.6) plumbing shared by dnnl_matmul and
// dnnl_conv: one CPU engine, a stream per thread, a cache of primitives keyed by their full
// description (a plan's shapes are static, so every GEMM and convolution of a plan creates
// its primitive once, when the CPU executor loads the plan (PrepareOnly below), and reuses
// it for every step), and the scratchpad in user mode from a per-thread workspace sized
// then to the largest need and kept. oneDNN runs on the same OpenMP threads as the rest of the
// backend (libdnnl is built with the OpenMP runtime).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace ampc::kernels::cpu::dnnl_support {

// A primitive prepared for one problem: its arguments (oneDNN ids) with the layout the
// caller's buffers have ("user") and the layout the primitive wants; where they differ the
// argument is reordered into (inputs) or out of (outputs) a per-thread buffer around the call.
struct Prepared {
  dnnl::primitive primitive;
  struct Arg {
    int id = 0;
    bool output = false;
    dnnl::memory::desc user, inner;
    std::unique_ptr<dnnl::reorder> reorder;  // user -> inner (inputs) or inner -> user
    bool serial_reorder = false;             // made and run on the calling thread alone
  };
  std::vector<Arg> args;
  size_t scratchpad_bytes = 0;
  bool serial = false;  // made and run on the calling thread alone (find_or_make)
};

// Multiply-adds below which a GEMM or convolution runs on the calling thread alone. The
// backend's OpenMP threads wait passively (a futex each), so a parallel region costs a wake-up
// and a reschedule of every other thread, tens of microseconds on a shared machine: more than
// a second thread saves on a problem this small (the bundled gpt's 64-wide GEMMs: 3.4 ms a
// step on 2 threads, 1.6 ms on 1).
constexpr double kSerialMultiplyAdds = 1 << 21;

// Layout reorders of at most this many bytes run on the calling thread. A reorder only moves
// memory, at about 25 GB/s on one core here (20 us for a [32,64,8,8] fp32 activation), while
// waking the other threads for it costs 50-60 us of futex wake-up on top of the halved copy
// (measured in isolation: 20 us serial, 70 us on two passive threads, 10 us on two spinning
// ones). A convolution on plain tensors reorders up to three operands around its call.
constexpr size_t kSerialReorderBytes = size_t(2) << 20;

// oneDNN's element type for f32 / bf16; false for any other.
bool dnnl_type(DType t, dnnl::memory::data_type* out);

dnnl::engine& engine();

// The cached Prepared for `key`, made by `make` the first time (null when make returns
// null or throws dnnl::error: then the caller runs its fallback). With `serial` the primitive
// is made with one OpenMP thread (oneDNN fixes its thread count when it makes a primitive)
// and execute() runs it so; serial must be a function of the problem that `key` names.
const Prepared* find_or_make(const std::string& key,
                             const std::function<std::unique_ptr<Prepared>()>& make,
                             bool serial = false);

// How many problems the cache holds (made, or found unservable): tests see when
// primitives are created.
size_t cached_problems();

// Completes a Prepared from a primitive descriptor: each (id, user desc, output) gets the
// primitive's own desc for it (query by id) and a reorder where the layouts differ.
struct ArgSpec {
  int id;
  dnnl::memory::desc user;
  bool output;
};
std::unique_ptr<Prepared> prepare(const dnnl::primitive_desc_base& pd, dnnl::primitive primitive,
                                  const std::vector<ArgSpec>& args);

// Runs the primitive on the caller's buffers (in the order of Prepared::args). Within a
// PrepareOnly scope it only sizes this thread's scratchpad and reorder buffers.
void execute(const Prepared& p, const std::vector<const void*>& buffers);

// While one lives on this thread, execute() runs nothing: a caller goes through its normal
// path (the primitive is made and cached, the workspace sized) without computing. The CPU
// executor prepares a plan's GEMMs and convolutions this way when the plan is loaded.
class PrepareOnly {
 public:
  PrepareOnly();
  ~PrepareOnly();
  PrepareOnly(const PrepareOnly&) = delete;
  PrepareOnly& operator=(const PrepareOnly&) = delete;
  static bool active();

 private:
  bool outer_;
};

// A primitive_attr with a user-mode scratchpad.
dnnl::primitive_attr user_scratchpad_attr();

}  // namespace ampc::kernels::cpu::dnnl_support
