#include "lower/plan_memory.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/checked_size.h"
#include "base/dtype.h"
#include "kernels/codegen/kernel.pb.h"
#include "lower/memory_plan.h"
#include "ops/op_info.h"
#include "runtime/plan/plan_stats.h"

namespace ampc::lower {
namespace {

using plan::Buffer;
using plan::Plan;
using plan::Step;

bool in_arena_role(const Buffer& b) {
  return b.role() == plan::ACTIVATION || b.role() == plan::OUTPUT;
}

// alias_of as set before planning: only an alias of a STATE buffer survives (a fused
// optimizer update written into the state it updates); views and in-place writes are the
// planner's own and are decided again.
int32_t state_alias(const Plan& p, const Buffer& b) {
  const int32_t target = b.alias_of() - 1;
  if (target < 0 || target >= p.buffers_size()) return -1;
  return p.buffers(target).role() == plan::STATE ? target : -1;
}

// Schedule points: step i is point i; point steps_size() is after the last step, when the
// caller reads the outputs and the state updates are applied.
struct Lifetimes {
  std::vector<int32_t> first;  // first > last: never live
  std::vector<int32_t> last;
  std::vector<bool> persists;  // OUTPUT or a state update's source: live to the end
};

Lifetimes lifetimes(const Plan& p) {
  const int32_t n = p.buffers_size();
  const int32_t end = p.steps_size();
  Lifetimes l{std::vector<int32_t>(n, INT32_MAX), std::vector<int32_t>(n, -1),
              std::vector<bool>(n, false)};
  for (int32_t s = 0; s < end; ++s) {
    for (int32_t o : p.steps(s).outputs()) {
      if (o >= 0 && o < n) l.first[o] = std::min(l.first[o], s);
    }
    for (int32_t i : p.steps(s).inputs()) {
      if (i >= 0 && i < n) l.last[i] = std::max(l.last[i], s);
    }
  }
  for (const auto& u : p.state_updates()) {
    if (u.source() >= 0 && u.source() < n) l.persists[u.source()] = true;
  }
  for (int32_t b = 0; b < n; ++b) {
    if (p.buffers(b).role() == plan::OUTPUT) l.persists[b] = true;
    if (l.persists[b]) l.last[b] = end;
    if (l.first[b] == INT32_MAX) {
      l.first[b] = l.last[b] >= 0 ? 0 : 1;  // read but never written: live from the start
    } else {
      l.last[b] = std::max(l.last[b], l.first[b]);  // written, never read
    }
  }
  return l;
}

// Single ONNX ops whose output element i depends only on element i of each input of the
// output's shape (the others broadcast): in an unfused plan, candidates for in-place writes.
bool is_elementwise_op(const Step& s) {
  return s.kernel().empty() && ops::op_info(s.domain(), s.op()).in_place;
}

// Storage shared through views and aliases: the buffer whose storage each buffer uses.
struct Storage {
  std::vector<int32_t> root;
};

// The root of every buffer: itself, the STATE buffer it already aliases, or (views) its
// input's root. Sets alias_of of the views it makes.
Storage share_views(Plan& p, const Lifetimes& life) {
  const int32_t n = p.buffers_size();
  Storage st{std::vector<int32_t>(n)};
  std::vector<int32_t> state_written(n, INT32_MAX);  // first step writing into a STATE buffer
  for (int32_t b = 0; b < n; ++b) {
    const int32_t s = state_alias(p, p.buffers(b));
    st.root[b] = s >= 0 ? s : b;
    if (s >= 0) state_written[s] = std::min(state_written[s], life.first[b]);
  }
  for (const Step& step : p.steps()) {
    if (!plan::is_view_step(step) || step.inputs_size() < 1 || step.outputs_size() < 1) continue;
    const int32_t in = step.inputs(0);
    const int32_t out = step.outputs(0);
    if (in < 0 || out < 0 || in >= n || out >= n || in == out) continue;
    Buffer& ob = *p.mutable_buffers(out);
    const Buffer& ib = p.buffers(in);
    if (!in_arena_role(ob) || st.root[out] != out || ob.dtype() != ib.dtype() ||
        buffer_bytes(ob) != buffer_bytes(ib))
      continue;
    const int32_t r = st.root[in];
    // A view of a STATE buffer must not outlive the state's old value: not past a step that
    // writes into the state, nor to the end (state updates, the caller's reads).
    if (p.buffers(r).role() == plan::STATE &&
        (life.persists[out] || life.last[out] >= state_written[r]))
      continue;
    ob.set_alias_of(in + 1);
    st.root[out] = r;
  }
  return st;
}

// Whether input k (of the step's inputs) is read element for element like output `out`:
// same shape and, for a fused kernel, a contiguous full operand.
bool full_operand(const Plan& p, const Step& step, const kernels::KernelDef* def, int k,
                  int32_t out) {
  const int32_t in = step.inputs(k);
  if (in < 0) return false;
  const Buffer& ib = p.buffers(in);
  const Buffer& ob = p.buffers(out);
  if (!std::equal(ib.shape().begin(), ib.shape().end(), ob.shape().begin(), ob.shape().end()))
    return false;
  if (!def) return true;
  const int per_segment = def->inputs_size();
  if (per_segment == 0) return false;
  const auto& operand = def->inputs(k % per_segment);
  return !operand.scalar() && operand.strides().empty();
}

// ampc.UnscaleCheck (the loss scaler's unscale of every gradient): gradient k (input k) is
// read and written unscaled (output k) element for element, each element by the thread that
// read it (kernels/cuda/amp.cu), so output k may take input k's storage when nothing else of
// the step reads it. Without this the fp16 plan held every gradient twice at its end, scaled
// and unscaled, and planned a larger arena than the fp32 plan.
void unscale_in_place(const Plan& p, const Step& step, const Storage& st,
                      std::vector<MemoryBuffer>& problem,
                      std::map<std::pair<int32_t, int32_t>, int32_t>& pairs) {
  std::unordered_map<int32_t, int> reads;  // storage -> reads by this step
  for (int j = 0; j < step.inputs_size(); ++j) {
    if (step.inputs(j) >= 0) ++reads[st.root[step.inputs(j)]];
  }
  for (int k = 1; k < step.inputs_size() && k < step.outputs_size(); ++k) {
    const int32_t in = step.inputs(k), out = step.outputs(k);
    if (in < 0 || out < 0 || st.root[out] != out || !in_arena_role(p.buffers(out))) continue;
    const int32_t storage = st.root[in];
    if (!in_arena_role(p.buffers(storage)) || reads.at(storage) != 1 ||
        buffer_bytes(p.buffers(in)) != buffer_bytes(p.buffers(out)) || pairs.count({out, storage}))
      continue;
    pairs[{out, storage}] = in;
    problem[out].may_share.push_back(storage);
  }
}

// In-place candidates of one step: for each arena output, the inputs of its segment with the
// same bytes and shape whose storage is read by this step only element for element. Appends
// (output, input) to `pairs`, the input's storage root to the output's may_share.
void inplace_candidates(const Plan& p, int32_t s, const Storage& st,
                        const std::map<std::string, const kernels::KernelDef*>& kernels,
                        std::vector<MemoryBuffer>& problem,
                        std::map<std::pair<int32_t, int32_t>, int32_t>& pairs) {
  const Step& step = p.steps(s);
  if (step.domain() == "ampc" && step.op() == "UnscaleCheck") {
    unscale_in_place(p, step, st, problem, pairs);
    return;
  }
  const kernels::KernelDef* def = nullptr;
  if (!step.kernel().empty()) {
    const auto it = kernels.find(step.kernel());
    if (it == kernels.end() || it->second->guard() != 0) return;
    def = it->second;
  } else if (!is_elementwise_op(step)) {
    return;
  }
  const int segments = std::max(1, step.segments());
  if (step.inputs_size() % segments || step.outputs_size() % segments) return;
  const int in_per = step.inputs_size() / segments;
  const int out_per = step.outputs_size() / segments;
  std::unordered_map<int32_t, std::vector<int>> reads;  // storage -> input positions
  for (int j = 0; j < step.inputs_size(); ++j) {
    if (step.inputs(j) >= 0) reads[st.root[step.inputs(j)]].push_back(j);
  }
  for (int ok = 0; ok < step.outputs_size(); ++ok) {
    const int32_t out = step.outputs(ok);
    if (out < 0 || st.root[out] != out || !in_arena_role(p.buffers(out))) continue;
    const int seg = ok / out_per;
    for (int k = seg * in_per; k < (seg + 1) * in_per; ++k) {
      const int32_t in = step.inputs(k);
      if (in < 0 || in == out || !in_arena_role(p.buffers(st.root[in])) ||
          buffer_bytes(p.buffers(in)) != buffer_bytes(p.buffers(out)) ||
          !full_operand(p, step, def, k, out))
        continue;
      // Every read of that storage by this step must be element for element too (an input
      // read twice, or through a view of the same shape), in this segment.
      const int32_t storage = st.root[in];
      bool legal = true;
      for (int j : reads.at(storage)) {
        legal &= j == k || (j / in_per == seg && full_operand(p, step, def, j, out));
      }
      if (!legal || pairs.count({out, storage})) continue;
      pairs[{out, storage}] = in;
      problem[out].may_share.push_back(storage);
    }
  }
}

// Lays out the buffers of `role` that own their storage, in buffer order; returns the bytes.
int64_t lay_out_region(Plan& p, const Storage& st, plan::BufferRole role,
                       plan::MemoryRegion region) {
  int64_t bytes = 0;
  for (Buffer& b : *p.mutable_buffers()) {
    const int64_t size = buffer_bytes(b);
    if (b.role() != role || st.root[b.id()] != b.id() || size < 0) continue;
    b.set_region(region);
    b.set_offset(bytes);
    bytes += align_up(size, kMemoryAlignment);
  }
  return bytes;
}

bool uses_gemm(const Plan& p) {
  for (const Step& s : p.steps()) {
    if (s.domain().empty() && (s.op() == "MatMul" || s.op() == "Gemm")) return true;
  }
  return false;
}

}  // namespace

void plan_memory(Plan& p) {
  const int32_t n = p.buffers_size();
  for (Buffer& b : *p.mutable_buffers()) {
    b.set_region(plan::REGION_NONE);
    b.set_offset(0);
    if (state_alias(p, b) < 0) b.set_alias_of(0);
  }
  const Lifetimes life = lifetimes(p);
  const Storage st = share_views(p, life);

  plan::MemoryPlan& m = *p.mutable_memory();
  m.Clear();
  m.set_alignment(kMemoryAlignment);
  m.set_state_bytes(lay_out_region(p, st, plan::STATE, plan::REGION_STATE));
  m.set_constant_bytes(lay_out_region(p, st, plan::CONSTANT, plan::REGION_CONSTANTS));
  m.set_input_bytes(lay_out_region(p, st, plan::INPUT, plan::REGION_INPUTS));
  m.set_workspace_bytes(uses_gemm(p) ? kCublasLtWorkspaceBytes : 0);

  // The arena: one problem buffer per storage root (indexed by buffer id; the others are
  // never live), its lifetime the union of those sharing it.
  std::vector<MemoryBuffer> problem(n, MemoryBuffer{0, 1, 0, {}});
  bool static_arena = true;
  for (int32_t b = 0; b < n; ++b) {
    const Buffer& buf = p.buffers(b);
    const int32_t r = st.root[b];
    if (!in_arena_role(p.buffers(r))) continue;
    const int64_t bytes = buffer_bytes(buf);
    static_arena &= bytes >= 0;
    if (life.first[b] > life.last[b]) continue;
    MemoryBuffer& pb = problem[r];
    pb.bytes = std::max(pb.bytes, bytes);
    if (pb.first > pb.last) {
      pb.first = life.first[b];
      pb.last = life.last[b];
    } else {
      pb.first = std::min(pb.first, life.first[b]);
      pb.last = std::max(pb.last, life.last[b]);
    }
  }
  if (static_arena) {
    std::map<std::string, const kernels::KernelDef*> kernels;
    for (const auto& k : p.kernels()) kernels[k.name()] = &k;
    std::map<std::pair<int32_t, int32_t>, int32_t> pairs;  // (output, storage) -> input
    for (int32_t s = 0; s < p.steps_size(); ++s)
      inplace_candidates(p, s, st, kernels, problem, pairs);
    const MemoryPlanResult r = plan_memory_offsets(problem);
    for (int32_t b = 0; b < n; ++b) {
      if (r.shared_with[b] >= 0)
        p.mutable_buffers(b)->set_alias_of(pairs.at({b, r.shared_with[b]}) + 1);
    }
    for (int32_t b = 0; b < n; ++b) {
      if (!in_arena_role(p.buffers(st.root[b]))) continue;
      p.mutable_buffers(b)->set_region(plan::REGION_ARENA);
      p.mutable_buffers(b)->set_offset(r.offsets[st.root[b]]);
    }
    m.set_arena_bytes(r.arena_bytes);
    m.set_arena_lower_bound_bytes(r.lower_bound_bytes);
  }

  // Buffers in another buffer's storage outside the arena: that buffer's region and offset.
  for (int32_t b = 0; b < n; ++b) {
    const Buffer& root = p.buffers(st.root[b]);
    if (st.root[b] == b || in_arena_role(root)) continue;
    p.mutable_buffers(b)->set_region(root.region());
    p.mutable_buffers(b)->set_offset(root.offset());
  }
}

ArenaPeak arena_peak(const Plan& p) {
  const int32_t n = p.buffers_size();
  const Lifetimes life = lifetimes(p);
  // The owner of each arena buffer's storage: the end of its alias chain.
  std::vector<int32_t> first(n, INT32_MAX), last(n, -1);
  std::vector<int64_t> bytes(n, 0);
  for (int32_t b = 0; b < n; ++b) {
    if (p.buffers(b).region() != plan::REGION_ARENA || life.first[b] > life.last[b]) continue;
    int32_t owner = b;
    for (int hops = 0; p.buffers(owner).alias_of() > 0 && hops < n; ++hops)
      owner = p.buffers(owner).alias_of() - 1;
    first[owner] = std::min(first[owner], life.first[b]);
    last[owner] = std::max(last[owner], life.last[b]);
    bytes[owner] =
        std::max(bytes[owner],
                 align_up(std::max<int64_t>(0, buffer_bytes(p.buffers(b))),
                          p.memory().alignment() > 0 ? p.memory().alignment() : kMemoryAlignment));
  }
  std::vector<int64_t> delta(p.steps_size() + 2, 0);
  for (int32_t b = 0; b < n; ++b) {
    if (first[b] > last[b]) continue;
    delta[first[b]] += bytes[b];
    delta[last[b] + 1] -= bytes[b];
  }
  ArenaPeak peak;
  int64_t live = 0;
  for (int32_t t = 0; t <= p.steps_size(); ++t) {
    live += delta[t];
    if (live > peak.bytes) {
      peak.bytes = live;
      peak.step = t;
    }
  }
  for (int32_t b = 0; b < n && peak.step >= 0; ++b) {
    if (first[b] <= peak.step && peak.step <= last[b] && bytes[b] > 0) peak.buffers.push_back(b);
  }
  auto key = [&](int32_t b) { return std::pair(bytes[b], buffer_bytes(p.buffers(b))); };
  std::stable_sort(peak.buffers.begin(), peak.buffers.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  return peak;
}

}  // namespace ampc::lower
