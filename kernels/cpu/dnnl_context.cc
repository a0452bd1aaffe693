#include "kernels/cpu/dnnl_context.h"

#include <omp.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace ampc::kernels::cpu::dnnl_support {
namespace {

using dt = dnnl::memory::data_type;

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<Prepared>> entries;  // null: not servable
};

Cache& cache() {
  static Cache c;
  return c;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Per-thread buffers: [0] the scratchpad, [1 + i] the reordered copy of argument i.
std::vector<std::vector<std::byte>>& thread_buffers() {
  thread_local std::vector<std::vector<std::byte>> b;
  return b;
}

void* buffer(size_t index, size_t bytes) {
  auto& b = thread_buffers();
  if (b.size() <= index) b.resize(index + 1);
  if (b[index].size() < bytes) b[index].resize(bytes);
  return b[index].data();
}

// While it lives (when `on`), OpenMP regions opened on this thread, oneDNN's included, run
// on this thread alone.
class SerialScope {
 public:
  explicit SerialScope(bool on) : saved_(on ? omp_get_max_threads() : 0) {
    if (on) omp_set_num_threads(1);
  }
  ~SerialScope() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_;
};

thread_local bool prepare_only = false;

}  // namespace

PrepareOnly::PrepareOnly() : outer_(prepare_only) {
  prepare_only = true;
}
PrepareOnly::~PrepareOnly() {
  prepare_only = outer_;
}
bool PrepareOnly::active() {
  return prepare_only;
}

bool dnnl_type(DType t, dnnl::memory::data_type* out) {
  if (t == DType::kFloat32) {
    *out = dt::f32;
  } else if (t == DType::kBFloat16) {
    *out = dt::bf16;
  } else {
    return false;
  }
  return true;
}

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

const Prepared* find_or_make(const std::string& key,
                             const std::function<std::unique_ptr<Prepared>()>& make, bool serial) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  if (it != c.entries.end()) return it->second.get();
  std::unique_ptr<Prepared> p;
  try {
    const SerialScope scope(serial);
    p = make();
    if (p) p->serial = serial;
  } catch (const dnnl::error&) {
    p.reset();  // a problem this oneDNN does not implement: the caller's fallback runs it
  }
  return c.entries.emplace(key, std::move(p)).first->second.get();
}

size_t cached_problems() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.entries.size();
}

std::unique_ptr<Prepared> prepare(const dnnl::primitive_desc_base& pd, dnnl::primitive primitive,
                                  const std::vector<ArgSpec>& args) {
  auto p = std::make_unique<Prepared>();
  p->primitive = std::move(primitive);
  p->scratchpad_bytes = pd.scratchpad_desc().get_size();
  for (const ArgSpec& a : args) {
    Prepared::Arg arg;
    arg.id = a.id;
    arg.output = a.output;
    arg.user = a.user;
    arg.inner = pd.query_md(dnnl::query::exec_arg_md, a.id);
    if (arg.inner != arg.user) {
      arg.serial_reorder =
          std::max(arg.user.get_size(), arg.inner.get_size()) <= kSerialReorderBytes;
      const SerialScope scope(arg.serial_reorder);
      arg.reorder = a.output ? std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(
                                   engine(), arg.inner, engine(), arg.user))
                             : std::make_unique<dnnl::reorder>(dnnl::reorder::primitive_desc(
                                   engine(), arg.user, engine(), arg.inner));
    }
    p->args.push_back(std::move(arg));
  }
  return p;
}

void execute(const Prepared& p, const std::vector<const void*>& buffers) {
  if (prepare_only) {
    if (p.scratchpad_bytes > 0) buffer(0, p.scratchpad_bytes);
    for (size_t i = 0; i < p.args.size(); ++i) {
      if (p.args[i].reorder) buffer(1 + i, p.args[i].inner.get_size());
    }
    return;
  }
  const SerialScope scope(p.serial);
  dnnl::stream& s = thread_stream();
  std::unordered_map<int, dnnl::memory> exec_args;
  std::vector<std::pair<dnnl::memory, dnnl::memory>> copy_back;  // inner -> user
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Prepared::Arg& a = p.args[i];
    // oneDNN takes non-const handles; inputs are only read.
    dnnl::memory user(a.user, engine(), const_cast<void*>(buffers[i]));
    if (!a.reorder) {
      exec_args.emplace(a.id, user);
      continue;
    }
    dnnl::memory inner(a.inner, engine(), buffer(1 + i, a.inner.get_size()));
    if (a.output) {
      copy_back.emplace_back(inner, user);
    } else {
      const SerialScope serial(a.serial_reorder);
      a.reorder->execute(s, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}});
    }
    exec_args.emplace(a.id, inner);
  }
  if (p.scratchpad_bytes > 0) {
    // The scratchpad's desc is a plain byte buffer (u8, 1-D).
    const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(p.scratchpad_bytes)}, dt::u8,
                                dnnl::memory::format_tag::a);
    exec_args.emplace(DNNL_ARG_SCRATCHPAD,
                      dnnl::memory(md, engine(), buffer(0, p.scratchpad_bytes)));
  }
  p.primitive.execute(s, exec_args);
  size_t k = 0;
  for (const Prepared::Arg& a : p.args) {
    if (a.reorder && a.output) {
      const SerialScope serial(a.serial_reorder);
      a.reorder->execute(s,
                         {{DNNL_ARG_FROM, copy_back[k].first}, {DNNL_ARG_TO, copy_back[k].second}});
      ++k;
    }
  }
  s.wait();
}

}  // namespace ampc::kernels::cpu::dnnl_support
