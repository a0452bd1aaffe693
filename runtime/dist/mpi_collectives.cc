#include "runtime/dist/mpi_collectives.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/half.h"
#include "runtime/dtype_codes.h"

namespace ampc::rt::dist {

using Clock = std::chrono::steady_clock;

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v)) return true;
  }
  return false;
}

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("MPI: ") + what + " failed: " + std::string(text, len));
}

// Sums of 16-bit floats, in fp32 and rounded once per addition (MPI has no fp16 type).
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<Half*>(in);
  auto* b = static_cast<Half*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_half(half_to_float(a[i]) + half_to_float(b[i]));
}
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<BFloat16*>(in);
  auto* b = static_cast<BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

constexpr auto kBeatInterval = std::chrono::milliseconds(500);

}  // namespace

class MpiCollectivesImpl {
 public:
  explicit MpiCollectivesImpl(const MpiOptions& o) : options(o) {}

  struct Pending {
    int64_t tag = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    bool done = false;
  };

  MpiOptions options;
  MPI_Comm comm = MPI_COMM_NULL, beats = MPI_COMM_NULL;
  MPI_Op half_op = MPI_OP_NULL, bf16_op = MPI_OP_NULL;
  int rank = 0, world = 1, local_rank = 0;

  std::mutex mpi;  // one MPI call at a time (MPI_THREAD_SERIALIZED use of a MULTIPLE library)
  std::mutex m;    // the fields below
  std::condition_variable changed;
  std::list<Pending> pending;  // a list: the progress thread keeps pointers into it
  bool stop = false;
  std::string phase = "start-up";
  std::thread progress;

  // Heartbeat: collectives joined, by this rank and (last heard) by each other rank.
  std::atomic<int64_t> joined{0};
  std::vector<int64_t> peer_joined, peer_buffer;
  std::vector<Clock::time_point> peer_heard;  // when each rank's last heartbeat arrived
  Clock::time_point last_beat{};
  std::vector<MPI_Request> peer_request;
  std::deque<std::pair<std::unique_ptr<int64_t>, MPI_Request>> sent;

  // Statistics of the gradient all-reduces.
  CommStats stats;
  Clock::time_point run_start{}, run_end{};
  bool run_open = false;

  void progress_loop() {
    std::unique_lock lock(m);
    while (!stop) {
      // A heartbeat twice a second even between collectives: a rank that stops responding
      // (killed, stopped, its node gone) falls silent, one that hangs elsewhere falls behind.
      if (Clock::now() - last_beat > kBeatInterval) {
        last_beat = Clock::now();
        lock.unlock();
        {
          std::lock_guard g(mpi);
          send_beats();
        }
        lock.lock();
      }
      std::vector<Pending*> open;
      for (auto& p : pending) {
        if (!p.done) open.push_back(&p);
      }
      if (open.empty()) {
        changed.wait_for(lock, std::chrono::milliseconds(50));
        lock.unlock();
        drain_beats();
        lock.lock();
        continue;
      }
      lock.unlock();
      std::vector<Pending*> finished;
      for (Pending* p : open) {
        int flag = 0;
        {
          std::lock_guard g(mpi);
          MPI_Test(&p->request, &flag, MPI_STATUS_IGNORE);
        }
        if (flag) finished.push_back(p);
      }
      drain_beats();  // while waiting too: a heartbeat's time is when it arrives
      lock.lock();
      if (finished.empty()) {
        lock.unlock();
        // Polling, but not spinning: the backward it overlaps needs the cores.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        lock.lock();
        continue;
      }
      for (Pending* p : finished) p->done = true;
      if (run_open) run_end = Clock::now();
      changed.notify_all();
    }
  }

  // Records the heartbeats received so far.
  void drain_beats() {
    std::lock_guard g(mpi);
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      for (;;) {
        int flag = 0;
        MPI_Test(&peer_request[p], &flag, MPI_STATUS_IGNORE);
        if (!flag) break;
        peer_joined[p] = std::max(peer_joined[p], peer_buffer[p]);
        peer_heard[p] = Clock::now();
        MPI_Irecv(&peer_buffer[p], 1, MPI_INT64_T, p, 0, beats, &peer_request[p]);
      }
    }
    while (!sent.empty()) {
      int flag = 0;
      MPI_Test(&sent.front().second, &flag, MPI_STATUS_IGNORE);
      if (!flag) break;
      sent.pop_front();
    }
  }

  // This rank joins one more collective: tells the others (under `mpi`).
  void beat() {
    ++joined;
    send_beats();
  }
  void send_beats() {
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      auto value = std::make_unique<int64_t>(joined.load());
      MPI_Request r;
      MPI_Isend(value.get(), 1, MPI_INT64_T, p, 0, beats, &r);
      sent.emplace_back(std::move(value), r);
    }
  }

  // Adds a started request (under no lock).
  void add(int64_t tag, MPI_Request r) {
    std::lock_guard lock(m);
    pending.push_back({tag, r, false});
    changed.notify_all();
  }

  std::string diagnose(const std::string& what) {
    drain_beats();
    // The heartbeat fields are written under `mpi` (lock order: `mpi`, then `m`).
    std::lock_guard g(mpi);
    std::lock_guard lock(m);
    std::string behind;
    const auto now = Clock::now();
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      const double silent = seconds(now - peer_heard[p]);
      if (silent > 4 * seconds(kBeatInterval)) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " (silent for %.1f s)", silent);
        behind += (behind.empty() ? "rank " : ", rank ") + std::to_string(p) + buf;
      } else if (peer_joined[p] < joined) {
        behind += (behind.empty() ? "rank " : ", rank ") + std::to_string(p) + " (joined " +
                  std::to_string(peer_joined[p]) + ")";
      }
    }
    char t[32];
    std::snprintf(t, sizeof t, "%g", options.timeout_s);
    std::string m = what + " (" + phase + ") did not complete within " + t + " s: ";
    if (!behind.empty()) {
      return m + behind + " did not take part (this rank has joined " + std::to_string(joined) +
             " collectives): it died or hangs; stopping";
    }
    return m + "every rank reached it, so the communication itself stalls; stopping";
  }

  // The all-reduces of one step end (under `m`): their span joins the statistics.
  void close_run() {
    if (!run_open) return;
    stats.in_flight_s += seconds(run_end - run_start);
    run_open = false;
  }

  // Waits for every request of `tag`, removes them.
  void wait(int64_t tag, const std::string& what, double timeout_s) {
    const auto t0 = Clock::now();
    const auto deadline =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    std::unique_lock lock(m);
    auto open = [&] {
      for (const auto& p : pending) {
        if (p.tag == tag && !p.done) return true;
      }
      return false;
    };
    while (open()) {
      if (changed.wait_until(lock, deadline) == std::cv_status::timeout && open()) {
        lock.unlock();
        throw Error(diagnose(what));
      }
    }
    const bool had =
        std::any_of(pending.begin(), pending.end(), [&](const Pending& p) { return p.tag == tag; });
    pending.remove_if([&](const Pending& p) { return p.tag == tag; });
    if (tag >= 0 && had) {
      stats.waited_s += seconds(Clock::now() - t0);
      ++stats.buckets;
    }
  }
};

MpiCollectives::MpiCollectives(const MpiOptions& options)
    : impl_(std::make_unique<MpiCollectivesImpl>(options)) {
  auto& d = *impl_;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED)
    throw Error("MPI: this MPI library offers no thread support (MPI_THREAD_SERIALIZED needed)");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &d.comm), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &d.beats), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(d.comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(d.beats, MPI_ERRORS_RETURN);
  MPI_Comm_rank(d.comm, &d.rank);
  MPI_Comm_size(d.comm, &d.world);
  MPI_Comm node;
  check(MPI_Comm_split_type(d.comm, MPI_COMM_TYPE_SHARED, d.rank, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  MPI_Comm_rank(node, &d.local_rank);
  MPI_Comm_free(&node);
  MPI_Op_create(half_sum, 1, &d.half_op);
  MPI_Op_create(bf16_sum, 1, &d.bf16_op);
  d.peer_joined.assign(d.world, 0);
  d.peer_buffer.assign(d.world, 0);
  d.peer_request.assign(d.world, MPI_REQUEST_NULL);
  d.peer_heard.assign(d.world, Clock::now());
  for (int p = 0; p < d.world; ++p) {
    if (p != d.rank)
      MPI_Irecv(&d.peer_buffer[p], 1, MPI_INT64_T, p, 0, d.beats, &d.peer_request[p]);
  }
  d.progress = std::thread([&d] { d.progress_loop(); });
  set_current(this);
}

MpiCollectives::~MpiCollectives() {
  auto& d = *impl_;
  set_current(nullptr);
  {
    std::lock_guard lock(d.m);
    d.stop = true;
    d.changed.notify_all();
  }
  d.progress.join();
  // Every rank's heartbeats are sent before any rank cancels its receives.
  MPI_Barrier(d.comm);
  for (auto& [value, r] : d.sent) MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Barrier(d.comm);
  d.drain_beats();
  for (auto& r : d.peer_request) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  MPI_Op_free(&d.half_op);
  MPI_Op_free(&d.bf16_op);
  MPI_Comm_free(&d.beats);
  MPI_Comm_free(&d.comm);
  MPI_Finalize();
}

int MpiCollectives::rank() const {
  return impl_->rank;
}
int MpiCollectives::world() const {
  return impl_->world;
}
int MpiCollectives::local_rank() const {
  return impl_->local_rank;
}

// The MPI type and sum of `dtype` (fp16/bf16: 16-bit words summed by our own ops).
static std::pair<MPI_Datatype, MPI_Op> mpi_sum_of(const MpiCollectivesImpl& d, DType dtype) {
  const DTypeCode<std::pair<MPI_Datatype, MPI_Op>> codes[] = {
      {DType::kFloat32, {MPI_FLOAT, MPI_SUM}},
      {DType::kFloat64, {MPI_DOUBLE, MPI_SUM}},
      {DType::kFloat16, {MPI_UINT16_T, d.half_op}},
      {DType::kBFloat16, {MPI_UINT16_T, d.bf16_op}}};
  if (const auto code = find_dtype_code(codes, dtype)) return *code;
  throw Error("cannot all-reduce " + std::string(dtype_name(dtype)));
}

static void check_count(int64_t count) {
  if (count > std::numeric_limits<int>::max())
    throw Error("a tensor of " + std::to_string(count) + " elements is too large for one MPI call");
}

void MpiCollectives::start_sum(int64_t tag, void* data, int64_t count, DType dtype) {
  auto& d = *impl_;
  if (tag < 0) throw Error("internal: negative all-reduce tag");
  const auto [type, op] = mpi_sum_of(d, dtype);
  check_count(count);
  MPI_Request r;
  {
    std::lock_guard lock(d.m);
    if (!d.run_open) {
      d.run_open = true;
      d.run_start = Clock::now();
    }
    d.stats.bytes += count * static_cast<int64_t>(dtype_size(dtype));
  }
  {
    std::lock_guard g(d.mpi);
    d.beat();
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, d.comm, &r),
          "MPI_Iallreduce");
  }
  d.add(tag, r);
}

void MpiCollectives::sum_now(void* data, int64_t count, DType dtype, const std::string& what) {
  auto& d = *impl_;
  const auto [type, op] = mpi_sum_of(d, dtype);
  check_count(count);
  MPI_Request r;
  {
    std::lock_guard g(d.mpi);
    d.beat();
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, d.comm, &r),
          "MPI_Iallreduce");
  }
  // Waited like every host collective: the progress thread tests it, the wait is bounded by
  // the timeout and names a silent or lagging rank.
  d.add(-4, r);
  d.wait(-4, what, d.options.timeout_s);
}

void MpiCollectives::bucket_started(int64_t tag) {
  // Measurement mode: the bucket's sum completes before the backward goes on (the wait then
  // finds it done and counts no second bucket).
  if (!impl_->options.overlap) wait(tag);
}

void MpiCollectives::wait(int64_t tag) {
  impl_->wait(tag, "the all-reduce of gradient bucket " + std::to_string(tag),
              impl_->options.timeout_s);
}

void MpiCollectives::sum(std::vector<double>& values, const std::string& what) {
  auto& d = *impl_;
  MPI_Request r;
  {
    std::lock_guard g(d.mpi);
    d.beat();
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                         MPI_SUM, d.comm, &r),
          "MPI_Iallreduce");
  }
  d.add(-1, r);
  d.wait(-1, what, d.options.timeout_s);
}

std::vector<uint64_t> MpiCollectives::all_gather(uint64_t value, const std::string& what) {
  auto& d = *impl_;
  std::vector<uint64_t> out(static_cast<size_t>(d.world));
  MPI_Request r;
  {
    std::lock_guard g(d.mpi);
    d.beat();
    check(MPI_Iallgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, d.comm, &r),
          "MPI_Iallgather");
  }
  d.add(-2, r);
  // Start-up: the ranks may compile their plans at different speeds.
  d.wait(-2, what, std::max(d.options.timeout_s, 120.0));
  return out;
}

void MpiCollectives::broadcast(std::vector<char>& bytes, int root, const std::string& what) {
  auto& d = *impl_;
  MPI_Request r;
  {
    std::lock_guard g(d.mpi);
    d.beat();
    check(MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, d.comm, &r),
          "MPI_Ibcast");
  }
  d.add(-3, r);
  d.wait(-3, what, d.options.timeout_s);
}

void MpiCollectives::set_phase(const std::string& phase) {
  std::lock_guard lock(impl_->m);
  impl_->phase = phase;
  impl_->close_run();
}

CommStats MpiCollectives::stats() const {
  std::lock_guard lock(impl_->m);
  impl_->close_run();
  return impl_->stats;
}

void MpiCollectives::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace ampc::rt::dist
