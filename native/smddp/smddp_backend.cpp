// smddp's CUDA path as a C++ c10d::Backend: no Python between a collective call and its kernel.
//
// The Python process group (smddp/process_group.py) spends 20-40 us of host time per call, which
// is longer than torch's symmetric-memory AllReduce kernels themselves at 8-512 KiB. This backend
// issues those kernels through the c10 dispatcher (boxed, so the same source builds against any
// torch >= 2.8 whatever C++ signature the op was registered with), on two persistent symmetric
// buffers used in turn, and hands every other CUDA call to an inner ProcessGroupNCCL.
// Python is entered only off the hot path: the one-time collective set-up of the buffers (and each
// growth), the parts of each new AllGather size, barrier, and CPU tensors, which go to the unchanged
// Python gloo path (cpu_path.GlooPath). The copy-engine AllGather is issued here whole (staging,
// symmetric-memory barriers, pulls on side streams, events: ce_driver.h) in the CUDA build; without
// it (no nvcc, no SymmetricMemory header) each call goes through the Python helper as before.
//
// With SMDDP_LAMPORT defined (the build that also compiles lamport_allreduce.cu with nvcc),
// AllReduce can also take smddp's own barrier-free one-shot kernel (path kLamport), synchronous
// calls on the caller's stream and asynchronous ones (DDP's buckets) on a stream the backend owns.
//
// Built on first use by smdist_launcher/smddp/native_backend.py (torch.utils.cpp_extension).
#include <torch/extension.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#ifdef SMDDP_LAMPORT
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
// The copy-engine AllGather issued here whole (stage, barrier, pulls, joins: no Python per call) needs
// the CUDA headers of this build and torch's SymmetricMemory class (its barrier, called from C++).
#if __has_include(<torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>)
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>
#define SMDDP_CE_NATIVE 1
#elif __has_include(<torch/csrc/distributed/c10d/SymmetricMemory.hpp>)
#include <torch/csrc/distributed/c10d/SymmetricMemory.hpp>
#define SMDDP_CE_NATIVE 1
#endif
#endif

#ifdef SMDDP_CE_NATIVE
#include <chrono>
#include <unordered_map>

#include "ce_driver.h"
#endif

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace py = pybind11;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace smddp {

#ifdef SMDDP_LAMPORT
// lamport_allreduce.cu
cudaError_t lamport_allreduce(const void* in, void* out, int64_t nbytes, int kind, void* const* peers, int rank,
                              int world, int64_t region_bytes, unsigned* ctrl, float scale, int max_blocks,
                              unsigned long long timeout_ns, cudaStream_t stream);
#endif

// Path and collective codes shared with routing.py (NATIVE_PATH_CODES / NATIVE_COLL_CODES).
enum Path : int { kNccl = 0, kCe = 1, kOneShot = 2, kTwoShot = 3, kLamport = 4, kNumPath = 5 };
// kAllReduceAsync: routes for asynchronous AllReduce calls (DDP's buckets), where the call's host
// cost and overlap count rather than its isolated bandwidth; without such routes they use kAllReduce's.
enum Coll : int { kAllReduce = 0, kAllGather = 1, kReduceScatter = 2, kAllReduceAsync = 3, kNumColl = 4 };

// A collective this backend ran itself on the caller's current stream, with what
// ProcessGroupNCCL's Work gives: wait() orders the waiting stream after it, and getFuture() is a
// device-aware Future. Both are made only when asked for (a synchronous dist.all_reduce waits on
// the stream it issued from, which needs nothing), and both only record/wait events, which is
// legal inside CUDA-graph capture. An event recorded later on the issuing stream covers the
// collective and whatever followed it: it may order more than needed, never less.
class StreamOrderedWork : public c10d::Work {
 public:
  StreamOrderedWork(std::vector<at::Tensor> result, c10d::OpType type, c10::Stream stream)
      : c10d::Work(-1, type), result_(std::move(result)), stream_(stream) {}
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    const auto* impl = c10::impl::getDeviceGuardImpl(stream_.device_type());
    const c10::Stream current = impl->getStream(stream_.device());
    if (current != stream_) {
      c10::Event event(stream_.device_type());
      event.record(stream_);
      event.block(current);
    }
    return true;
  }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{stream_.device()});
      c10::StreamGuard guard(stream_);  // markCompleted records its events on the current stream
      future_->markCompleted(c10::IValue(result_));
    }
    return future_;
  }

 private:
  std::vector<at::Tensor> result_;
  c10::Stream stream_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The Python helper (native_backend.NativeHelper) outlives nothing it needs: release it with the
// GIL, and leak it rather than touch an interpreter that is finalizing.
struct PyRef {
  explicit PyRef(py::object obj) : obj(new py::object(std::move(obj))) {}
  ~PyRef() {
#if PY_VERSION_HEX >= 0x030D0000
    const bool finalizing = Py_IsFinalizing();
#else
    const bool finalizing = _Py_IsFinalizing();
#endif
    if (Py_IsInitialized() && !finalizing) {
      py::gil_scoped_acquire gil;
      delete obj;
    }
  }
  py::object* obj;
};

class SmddpBackend : public c10d::Backend {
 public:
  // routes: (collective code, largest size in bytes, path code), ascending per collective.
  SmddpBackend(int rank, int size, c10::intrusive_ptr<c10d::Backend> nccl, py::object helper,
               const std::vector<std::tuple<int, int64_t, int>>& routes)
      : c10d::Backend(rank, size), nccl_(std::move(nccl)), helper_(std::make_shared<PyRef>(std::move(helper))) {
    for (const auto& [coll, limit, path] : routes) {
      check_coll(coll);
      check_path(path);
      routes_[coll].emplace_back(limit, path);
    }
    auto& dispatcher = c10::Dispatcher::singleton();
    one_shot_ = dispatcher.findSchema({"symm_mem::one_shot_all_reduce_copy_out", ""});
    two_shot_ = dispatcher.findSchema({"symm_mem::two_shot_all_reduce_out", ""});
  }

  const std::string getBackendName() const override { return "smddp"; }

  // ---- routing ----
  // Codes come from Python (routing.py, or a caller of these bindings): checked, since they index arrays.
  static void check_coll(int coll) { TORCH_CHECK(coll >= 0 && coll < kNumColl, "smddp: bad collective code ", coll); }
  static void check_path(int path) { TORCH_CHECK(path >= 0 && path < kNumPath, "smddp: bad path code ", path); }

  void force(int coll, int path) {
    check_coll(coll);
    check_path(path);
    forced_[coll] = path;
  }
  void unforce(int coll) {
    check_coll(coll);
    forced_[coll].reset();
  }

  int route_code(int coll, int64_t nbytes) const {
    check_coll(coll);
    return route(coll, nbytes);
  }

  int route(int coll, int64_t nbytes) const {
    if (coll == kAllReduceAsync) {  // forcing all_reduce forces both; no async routes: the sync ones
      if (forced_[kAllReduce].has_value()) return *forced_[kAllReduce];
      if (routes_[kAllReduceAsync].empty()) coll = kAllReduce;
    }
    if (forced_[coll].has_value()) return *forced_[coll];
    for (const auto& [limit, path] : routes_[coll]) {
      if (nbytes <= limit) return path;
    }
    return kNccl;
  }

  // The Python helper (native_backend.NativeHelper): benchmarks tune its copy-engine AllGather.
  py::object helper_object() { return helper(); }

  // (calls, host nanoseconds, parts) of the copy-engine AllGathers issued natively: what they cost
  // the caller's thread, and how many staged parts (barriers) they took (tests, benchmarks).
  std::vector<int64_t> ce_stats() const {
#ifdef SMDDP_CE_NATIVE
    return {ce_.calls, ce_.host_ns, ce_.parts};
#else
    return {0, 0, 0};
#endif
  }

  // Calls that took a fast path, per path code (tests check that the path really ran).
  std::vector<int64_t> fast_calls() const { return {fast_calls_.begin(), fast_calls_.end()}; }

  // ---- all_reduce ----
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("allreduce", tensors, opts);
    if (tensors.size() == 1 && !coalescing_) {
      at::Tensor& t = tensors[0];
      if (route(opts.asyncOp ? kAllReduceAsync : kAllReduce, t.numel() * t.element_size()) == kLamport) {
        // Asynchronous callers (DDP's reducer) get the backend's own stream, which overlaps
        // their compute as NCCL's stream would.
        if (WorkPtr work = lamport(t, opts.reduceOp, opts.asyncOp)) return work;
      } else if (!opts.asyncOp && fast_allreduce(t, opts.reduceOp)) {
        // torch's kernels: synchronous calls only (and so CUDA-graph capture), on the caller's
        // stream. Asynchronous callers want overlap with their compute: with DDP buckets of 2 MB
        // on the caller's stream the step ran 0.92x NCCL's (2x H100, 2026-11-27).
        return done(tensors, c10d::OpType::ALLREDUCE, t.device());
      }
    }
    return nccl_->allreduce(tensors, opts);
  }

  // Set by a Lamport call that timed out waiting for a peer, just before it traps (tests; syncs).
  int64_t lamport_timeouts() {
#ifdef SMDDP_LAMPORT
    if (lamport_.ctrl.defined()) return lamport_.ctrl[2].item<int64_t>();
#endif
    return 0;
  }

  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("allreduce_coalesced", tensors, opts);
    return nccl_->allreduce_coalesced(tensors, opts);
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("reduce", tensors, opts);
    return nccl_->reduce(tensors, opts);
  }

  // ---- gathers ----
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) override {
    if (!output.is_cuda()) return cpu("allgather_base", output, input, opts);
    if (!coalescing_ && route(kAllGather, output.numel() * output.element_size()) == kCe) {
      if (ce_allgather(output, input)) {
        ++fast_calls_[kCe];
        return done({output}, c10d::OpType::_ALLGATHER_BASE, output.device());
      }
    }
    return nccl_->_allgather_base(output, input, opts);
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override {
    if (!inputs.empty() && !inputs[0].is_cuda()) return cpu("allgather", outputs, inputs, opts);
    return nccl_->allgather(outputs, inputs, opts);
  }

  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override {
    if (!inputs.empty() && !inputs[0].is_cuda()) {
      std::vector<WorkPtr> works;
      for (size_t i = 0; i < inputs.size(); ++i) {
        std::vector<std::vector<at::Tensor>> out{outputs.at(i)};
        std::vector<at::Tensor> in{inputs[i]};
        works.push_back(cpu("allgather", out, in, opts));
      }
      return chain(works);
    }
    return nccl_->allgather_coalesced(outputs, inputs, opts);
  }

  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) override {
    if (!inputs.empty() && !inputs[0].is_cuda()) {
      std::vector<WorkPtr> works;
      for (size_t i = 0; i < inputs.size(); ++i) works.push_back(cpu("allgather_base", outputs.at(i), inputs[i], opts));
      return chain(works);
    }
    return nccl_->allgather_into_tensor_coalesced(outputs, inputs, opts);
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override {
    if (!inputs.empty() && !inputs[0].is_cuda()) return cpu("gather", outputs, inputs, opts);
    return nccl_->gather(outputs, inputs, opts);
  }

  // ---- reduce-scatter (NCCL's ring is at line rate: no smddp path, see cuda_path.py) ----
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override {
    if (!outputs.empty() && !outputs[0].is_cuda()) return cpu("reduce_scatter", outputs, inputs, opts);
    return nccl_->reduce_scatter(outputs, inputs, opts);
  }

  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override {
    if (!output.is_cuda()) return cpu("reduce_scatter_base", output, input, opts);
    return nccl_->_reduce_scatter_base(output, input, opts);
  }

  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override {
    if (!outputs.empty() && !outputs[0].is_cuda()) {
      std::vector<WorkPtr> works;
      for (size_t i = 0; i < outputs.size(); ++i) {
        works.push_back(cpu("reduce_scatter_base", outputs[i], inputs.at(i), opts));
      }
      return chain(works);
    }
    return nccl_->reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  }

  // ---- one-to-all, all-to-all, point-to-point: NCCL or gloo as they are ----
  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("broadcast", tensors, opts);
    return nccl_->broadcast(tensors, opts);
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override {
    if (!outputs.empty() && !outputs[0].is_cuda()) return cpu("scatter", outputs, inputs, opts);
    return nccl_->scatter(outputs, inputs, opts);
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) override {
    if (!output.is_cuda()) return cpu("alltoall_base", output, input, output_splits, input_splits, opts);
    return nccl_->alltoall_base(output, input, output_splits, input_splits, opts);
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override {
    if (!outputs.empty() && !outputs[0].is_cuda()) return cpu("alltoall", outputs, inputs, opts);
    return nccl_->alltoall(outputs, inputs, opts);
  }

  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("send", tensors, dst, tag);
    return nccl_->send(tensors, dst, tag);
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("recv", tensors, src, tag);
    return nccl_->recv(tensors, src, tag);
  }

  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    if (!tensors.empty() && !tensors[0].is_cuda()) return cpu("recv_anysource", tensors, tag);
    return nccl_->recvAnysource(tensors, tag);
  }

  // The same as the Python group: queued GPU work finishes, then a host barrier over gloo.
  WorkPtr barrier(const c10d::BarrierOptions& /*opts*/) override {
    py::gil_scoped_acquire gil;
    return helper().attr("barrier")().cast<WorkPtr>();
  }

  // ---- group plumbing, forwarded to NCCL ----
  bool supportsCoalescing() const override { return nccl_->supportsCoalescing(); }
  void startCoalescing() override {
    coalescing_ = true;
    nccl_->startCoalescing();
  }
  WorkPtr endCoalescing() override {
    coalescing_ = false;
    return nccl_->endCoalescing();
  }
  void setSequenceNumberForGroup() override { nccl_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return nccl_->getSequenceNumberForGroup(); }
  void setGroupUid(const std::string& pg_uid) override {
    c10d::Backend::setGroupUid(pg_uid);
    nccl_->setGroupUid(pg_uid);
  }
  void shutdown() override { nccl_->shutdown(); }
  void abort() override { nccl_->abort(); }

 private:
  py::object& helper() { return *helper_->obj; }

  template <typename... Args>
  WorkPtr cpu(const char* method, Args&&... args) {
    py::gil_scoped_acquire gil;
    return helper().attr("cpu").attr(method)(std::forward<Args>(args)...).template cast<WorkPtr>();
  }

  static WorkPtr chain(std::vector<WorkPtr>& works) {
    TORCH_CHECK(!works.empty(), "smddp: empty coalesced call");
    for (size_t i = 0; i + 1 < works.size(); ++i) works[i]->wait();
    return works.back();
  }

  WorkPtr done(std::vector<at::Tensor> result, c10d::OpType type, const at::Device& device) {
    const c10::Stream stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
    return c10::make_intrusive<StreamOrderedWork>(std::move(result), type, stream);
  }

  // Collective: every rank reaches the first fast call (and each growth) at the same call.
  bool ensure_buffers(const at::Device& device, int64_t nbytes) {
    if (fast_off_) return false;
    if (capacity_ >= nbytes) return true;
    py::gil_scoped_acquire gil;
    py::object got = helper().attr("allreduce_buffers")(device.index(), nbytes, getGroupUid());
    if (got.is_none()) {
      fast_off_ = true;
      return false;
    }
    auto parts = got.cast<py::tuple>();
    group_name_ = c10::IValue(parts[0].cast<std::string>());
    buffers_[0] = parts[1].cast<at::Tensor>();
    buffers_[1] = parts[2].cast<at::Tensor>();
    scratch_ = parts[3].cast<at::Tensor>();
    views_[0].clear();
    views_[1].clear();
    capacity_ = buffers_[0].numel();
    return capacity_ >= nbytes;
  }

  // The typed view of the current buffer's first nbytes, made once per (buffer, dtype, size):
  // two fewer tensor ops per call (a training step repeats the same few sizes).
  const at::Tensor& staged_view(at::ScalarType dtype, int64_t nbytes) {
    auto& cache = views_[turn_];
    const auto key = std::make_pair(static_cast<int>(dtype), nbytes);
    auto it = cache.find(key);
    if (it == cache.end()) {
      if (cache.size() > 64) cache.clear();
      it = cache.emplace(key, buffers_[turn_].narrow(0, 0, nbytes).view(dtype)).first;
    }
    return it->second;
  }

  // ---- smddp's Lamport one-shot (lamport_allreduce.cu) ----
  // The kernels of one group must run one after the other on each rank, in issue order.
  // Synchronous calls run on the caller's stream; when the previous call ran on another stream,
  // the caller's stream first waits for it (one event; none in the usual case of one stream).
  // Asynchronous calls (DDP's buckets) run on the backend's own stream, after the caller's
  // stream and the previous call, and return a Work whose wait() and Future order the waiting
  // stream after the kernel. Inside CUDA-graph capture every call, asynchronous ones too, runs
  // on the capturing stream, which orders the captured calls (torch.cuda.graph synchronizes the
  // device before capture; replays are ordered with eager calls by the stream that replays
  // them: replay on the stream of the eager calls). Events only: graph-capturable.
  WorkPtr lamport(at::Tensor& t, const c10d::ReduceOp& reduce_op, bool async_op) {
#ifdef SMDDP_LAMPORT
    const auto op = reduce_op.op_;
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) return {};
    const auto dtype = t.scalar_type();
    const int kind = dtype == at::kFloat ? 0 : dtype == at::kBFloat16 ? 1 : dtype == at::kHalf ? 2 : -1;
    const int64_t nbytes = t.numel() * t.element_size();
    // Only what every rank shares (dtype, op, size, layout) may send a call to NCCL: a rank that
    // took NCCL while its peers took the kernel would leave them waiting. The address is not
    // shared (an offset view may sit differently on each rank): unaligned tensors are staged below.
    if (kind < 0 || nbytes == 0 || !t.is_contiguous()) return {};
    const c10::cuda::CUDAGuard guard(t.device());
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(t.device().index());
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(current.stream(), &capture));
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    if (capturing && lamport_.region_bytes == 0 && !lamport_.off) {
      // The one-time set-up fills and synchronizes the device, which capture forbids. Every rank
      // captures the same calls, so every rank hands these to NCCL alike.
      TORCH_WARN_ONCE("smddp: the first Lamport AllReduce of a group came inside CUDA-graph capture; NCCL "
                      "serves the calls captured before any eager call (warm up before capturing)");
      return {};
    }
    if (!ensure_lamport(t.device()) || nbytes > lamport_.region_bytes) return {};
    // Inside capture asynchronous calls stay on the capturing stream: on the backend's stream a
    // captured kernel would be ordered with the next synchronous one only if the caller waited
    // on its Work first, and two Lamport kernels of one group must never overlap (same slot).
    const bool own_stream = async_op && !capturing;
    const c10::cuda::CUDAStream stream = own_stream ? *lamport_.stream : current;
    if (own_stream) {
      C10_CUDA_CHECK(cudaEventRecord(lamport_.fork, current.stream()));
      C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), lamport_.fork, 0));
    }
    if (!capturing && lamport_.last.has_value() && *lamport_.last != stream && *lamport_.last != current) {
      C10_CUDA_CHECK(cudaEventRecord(lamport_.join, lamport_.last->stream()));
      C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), lamport_.join, 0));
    }
    // The kernel uses 16-byte vector accesses: an unaligned tensor goes through an aligned copy
    // made on the kernel's stream (freed into that stream's pool, so reused only after it).
    const bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
    at::Tensor data = t;
    if (!aligned) {
      const c10::cuda::CUDAStreamGuard on(stream);
      data = at::empty_like(t, at::MemoryFormat::Contiguous);
      data.copy_(t);
    }
    const float scale = op == c10d::ReduceOp::AVG ? 1.0f / static_cast<float>(size_) : 1.0f;
    C10_CUDA_CHECK(lamport_allreduce(data.data_ptr(), data.data_ptr(), nbytes, kind, lamport_.peers.data(), rank_,
                                     size_, lamport_.region_bytes, static_cast<unsigned*>(lamport_.ctrl.data_ptr()),
                                     scale, lamport_.max_blocks, lamport_.timeout_ns, stream.stream()));
    if (!aligned) {
      const c10::cuda::CUDAStreamGuard on(stream);
      t.copy_(data);
    }
    ++fast_calls_[kLamport];
    if (!capturing) lamport_.last = stream;
    if (own_stream) {
      // The caller may free t before the kernel ends: keep its memory from reuse until then.
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
      return c10::make_intrusive<StreamOrderedWork>(std::vector<at::Tensor>{t}, c10d::OpType::ALLREDUCE,
                                                    static_cast<c10::Stream>(stream));
    }
    return done({t}, c10d::OpType::ALLREDUCE, t.device());
#else
    (void)t;
    (void)reduce_op;
    (void)async_op;
    return {};
#endif
  }

#ifdef SMDDP_LAMPORT
  // Collective: every rank reaches the first Lamport call of the group at the same call.
  bool ensure_lamport(const at::Device& device) {
    if (lamport_.off) return false;
    if (lamport_.region_bytes > 0) return true;
    py::gil_scoped_acquire gil;
    py::object got = helper().attr("lamport_buffers")(device.index(), getGroupUid());
    if (got.is_none()) {
      lamport_.off = true;
      return false;
    }
    auto parts = got.cast<py::tuple>();
    lamport_.buffer = parts[0].cast<at::Tensor>();
    for (auto ptr : parts[1].cast<std::vector<int64_t>>()) lamport_.peers.push_back(reinterpret_cast<void*>(ptr));
    lamport_.timeout_ns = static_cast<unsigned long long>(parts[3].cast<double>() * 1e9);
    lamport_.ctrl = at::zeros({4}, at::TensorOptions().dtype(at::kInt).device(device));
    lamport_.stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index());
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&lamport_.fork, cudaEventDisableTiming));
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&lamport_.join, cudaEventDisableTiming));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&lamport_.max_blocks, cudaDevAttrMultiProcessorCount, device.index()));
    TORCH_CHECK(static_cast<int>(lamport_.peers.size()) == size_, "smddp: expected ", size_, " peer buffers");
    lamport_.region_bytes = parts[2].cast<int64_t>();
    return true;
  }
#endif

  // ---- the copy-engine AllGather ----
  // The Python helper's CopyEngineAllGather (fast_allgather.py) per call: set-up, the SM staging
  // copy (SMDDP_CE_KERNEL_STAGE) and builds without the native path (no CUDA headers).
  bool ce_allgather_python(at::Tensor& output, at::Tensor& input) {
    py::gil_scoped_acquire gil;
    return helper().attr("allgather_ce")(output, input, getGroupUid()).cast<bool>();
  }

  // True when the copy engines ran the call (false: NCCL serves it, on every rank alike).
  bool ce_allgather(at::Tensor& output, at::Tensor& input) {
#ifdef SMDDP_CE_NATIVE
    if (ce_.mode == CeMode::kPython) return ce_allgather_python(output, input);
    if (ce_.mode == CeMode::kOff) return false;
    // Only what every rank shares decides (CopyEngineAllGather.eligible): a rank on NCCL while its
    // peers pull would leave them at the barrier. Where the input sits is rank-local: handled below.
    if (!output.is_contiguous() || !input.is_contiguous() || output.scalar_type() != input.scalar_type() ||
        output.device() != input.device() || output.numel() != input.numel() * size_) {
      return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const c10::cuda::CUDAGuard guard(output.device());
    const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(output.device().index());
    // Inside CUDA-graph capture: NCCL (a replay would restage the one captured buffer while a peer may
    // still pull the previous replay's data; the set-up cannot be captured). Every rank captures alike.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(main.stream(), &capture));
    if (capture != cudaStreamCaptureStatusNone) return false;
    const int64_t nbytes = input.numel() * input.element_size();
    if (nbytes == 0) return true;
    if (!ensure_ce(output.device(), nbytes)) {
      return ce_.mode == CeMode::kPython ? ce_allgather_python(output, input) : false;
    }
    const auto& parts = ce_plan(nbytes);
    using smddp_ce::CUdeviceptr;
    const auto out_ptr = reinterpret_cast<CUdeviceptr>(output.data_ptr());
    const auto out_bytes = static_cast<CUdeviceptr>(nbytes) * size_;
    const auto own = out_ptr + static_cast<CUdeviceptr>(rank_) * nbytes;
    // An input overlapping the output other than as exactly this rank's chunk (FSDP2's in place, no copy)
    // is copied aside first: pulls into the chunk it overlaps would overwrite it before it is staged.
    at::Tensor in = input;
    const auto in0 = reinterpret_cast<CUdeviceptr>(input.data_ptr());
    const bool apart = in0 + nbytes <= out_ptr || out_ptr + out_bytes <= in0;
    if (!apart && in0 != own) in = input.clone();
    const auto in_ptr = reinterpret_cast<CUdeviceptr>(in.data_ptr());
    const int turn = ce_.turn;
    ce_.turn ^= 1;
    cudaStream_t ms = main.stream();
    const auto& drv = smddp_ce::driver();
    // A call staging into buffer k%2 is safe once the previous call's barrier passed on the same stream
    // (symm_buffers.py); a call on another stream first waits for the previous call's end, so the calls
    // of a group stay one chain whatever streams issue them (as NCCL's one stream).
    if (ce_.last.has_value() && *ce_.last != ms) ce_check(drv.wait(ms, ce_.done, 0), "chaining");
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto [start, len] = parts[i];
      ce_check(smddp_ce::stage_part(ce_.ctx, ms, ce_.local, ce_.events.data(), out_ptr, in_ptr, ce_.bufs[turn],
                                    nbytes, start, len, rank_, i == 0),
               "staging");
      ce_.handles[turn]->barrier(/*channel=*/0, /*timeout_ms=*/0);  // every peer staged this part
      ce_check(smddp_ce::pull_part(ce_.ctx, ms, ce_.pulls.data(), ce_.events.data(), out_ptr, ce_.peers[turn].data(),
                                   nbytes, start, len, rank_, size_, ce_.splits, ce_.serial),
               "pulls");
    }
    const int joined = ce_.serial ? 1 : static_cast<int>(ce_.pulls.size());
    ce_check(smddp_ce::join(ce_.ctx, ms, ce_.pulls.data(), joined, ce_.events.data()), "join");
    ce_check(drv.record(ce_.done, ms), "recording the end");
    ce_.last = ms;
    ++ce_.calls;
    ce_.parts += static_cast<int64_t>(parts.size());
    ce_.host_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    return true;
#else
    return ce_allgather_python(output, input);
#endif
  }

#ifdef SMDDP_CE_NATIVE
  static void ce_check(int rc, const char* what) {
    TORCH_CHECK(rc == 0, "smddp copy-engine all_gather: ", what, " failed with CUDA driver error ", rc);
  }

  // Collective: every rank reaches the first call (and each that needs larger buffers) at the same call,
  // as they issue the same sizes in the same order.
  bool ensure_ce(const at::Device& device, int64_t nbytes) {
    if (ce_.mode == CeMode::kNative && ce_.capacity >= nbytes) return true;
    if (ce_.mode != CeMode::kUnknown && ce_.mode != CeMode::kNative) return false;
    // Growth frees the old pair (Python re-makes it after a device sync): drop what refers to it first.
    ce_.capacity = 0;
    ce_.handles = {};
    ce_.peers = {};
    py::gil_scoped_acquire gil;
    py::object got = helper().attr("allgather_ce_state")(device.index(), nbytes, getGroupUid());
    if (py::isinstance<py::str>(got)) {
      ce_.mode = got.cast<std::string>() == "off" ? CeMode::kOff : CeMode::kPython;
      return false;
    }
    std::string failed;  // empty: this rank's state is ready
    int64_t ready = 0;  // its capacity, taken only once every rank agreed (agree may raise: then none is)
    try {
      auto st = got.cast<py::tuple>();
      TORCH_CHECK(st.size() == 9, "smddp: copy-engine state of ", st.size(), " items");
      const int64_t capacity = st[0].cast<int64_t>();
      auto bufs = st[1].cast<std::vector<int64_t>>();
      auto handles = st[2].cast<py::list>();
      auto peers = st[3].cast<std::vector<std::vector<int64_t>>>();
      auto pulls = st[4].cast<std::vector<int64_t>>();
      const int splits = st[6].cast<int>();
      TORCH_CHECK(capacity >= nbytes && bufs.size() == 2 && handles.size() == 2 && peers.size() == 2 &&
                      peers[0].size() == static_cast<size_t>(size_) && peers[1].size() == static_cast<size_t>(size_),
                  "smddp: copy-engine state does not fit the group");
      // pull_part uses streams[(peer step - 1) * splits + piece] and events[2 + stream]
      TORCH_CHECK(splits >= 1 && pulls.size() == static_cast<size_t>((size_ - 1) * splits),
                  "smddp: copy-engine state has ", pulls.size(), " pull streams for ", splits, " splits");
      for (int b = 0; b < 2; ++b) {
        ce_.bufs[b] = static_cast<smddp_ce::CUdeviceptr>(bufs[b]);
        ce_.handles[b] = handles[b].cast<c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemory>>();
        ce_.peers[b].assign(peers[b].begin(), peers[b].end());
      }
      if (ce_.events.empty()) {  // once per group: the driver, the context, the events
        TORCH_CHECK(smddp_ce::init() == 0, "smddp: cannot reach the CUDA driver (libcuda.so.1)");
        const c10::cuda::CUDAGuard guard(device);
        C10_CUDA_CHECK(cudaFree(nullptr));  // the device's primary context is current on this thread
        ce_check(smddp_ce::current_context(&ce_.ctx), "getting the context");
        TORCH_CHECK(ce_.ctx != nullptr, "smddp: no current CUDA context");
        std::vector<void*> events(2 + pulls.size() + 1);
        ce_check(smddp_ce::make_events(static_cast<int>(events.size()), events.data()), "creating events");
        ce_.done = events.back();
        events.pop_back();
        ce_.events = std::move(events);
      }
      TORCH_CHECK(ce_.events.size() == 2 + pulls.size(), "smddp: the copy-engine streams changed");
      ce_.pulls.clear();
      for (auto h : pulls) ce_.pulls.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(h)));
      ce_.local = reinterpret_cast<void*>(static_cast<uintptr_t>(st[5].cast<int64_t>()));
      ce_.splits = splits;
      ce_.serial = st[7].cast<bool>();
      ce_.version = st[8].cast<at::Tensor>();
      TORCH_CHECK(ce_.version.device().is_cpu() && ce_.version.scalar_type() == at::kLong && ce_.version.numel() == 1,
                  "smddp: the plan version is not one CPU int64");
      ce_.plans.clear();
      ce_.plans_version = -1;
      ce_.turn = 0;  // a new pair: every rank starts it at buffer 0
      ready = capacity;
    } catch (const c10::Error& e) {
      // Not what(): that symbolizes the C++ backtrace, which no caller of this message needs.
      failed = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failed = e.what();
    }
    if (!ready && failed.empty()) failed = "unknown error";
    // A failure can be this rank's alone (its driver, events, a state it could not read): every rank takes the
    // path the worst one can, or those issuing C++ parts would wait at barriers the others never reach.
    if (helper().attr("agree")(failed.empty()).cast<bool>()) {
      ce_.capacity = ready;
      ce_.mode = CeMode::kNative;
      return true;
    }
    ce_.handles = {};
    ce_.capacity = 0;
    ce_.mode = CeMode::kPython;
    if (failed.empty()) {
      TORCH_WARN("smddp: a peer could not set up the native copy-engine AllGather; issuing its copies from Python");
    } else {
      TORCH_WARN("smddp: the native copy-engine AllGather is unavailable (", failed,
                 "); issuing its copies from Python");
    }
    return false;
  }

  // The parts of a call of nbytes per rank: asked of Python once per size (fast_allgather.PartPlans),
  // then cached until the plan version moves (chunks / min_part changed). Checked to tile [0, nbytes)
  // in order, so that every byte is staged and pulled once (ce_driver.h bounds-checks each part too).
  const std::vector<std::pair<size_t, size_t>>& ce_plan(int64_t nbytes) {
    const int64_t version = ce_.version.data_ptr<int64_t>()[0];  // a plain read: no GIL needed
    if (version != ce_.plans_version) {
      ce_.plans.clear();
      ce_.plans_version = version;
    }
    auto it = ce_.plans.find(nbytes);
    if (it != ce_.plans.end()) return it->second;
    std::vector<std::pair<size_t, size_t>> parts;
    {
      py::gil_scoped_acquire gil;
      for (auto item : helper().attr("allgather_ce_plan")(nbytes)) {
        auto part = item.cast<py::tuple>();
        parts.emplace_back(part[0].cast<size_t>(), part[1].cast<size_t>());
      }
    }
    size_t next = 0;
    for (const auto& [start, len] : parts) {
      TORCH_CHECK(start == next && len > 0 && len <= static_cast<size_t>(nbytes) - start,
                  "smddp: copy-engine parts do not tile the ", nbytes, " bytes");
      next += len;
    }
    TORCH_CHECK(next == static_cast<size_t>(nbytes), "smddp: copy-engine parts cover ", next, " of ", nbytes, " bytes");
    if (ce_.plans.size() >= 256) ce_.plans.clear();
    return ce_.plans.emplace(nbytes, std::move(parts)).first->second;
  }
#endif

  // One-shot: one kernel copies the input into the symmetric buffer, barriers, reads every
  // peer's buffer and writes the sum to the output. Two-shot: the input is copied in, then one
  // kernel reduce-scatters and all-gathers into the output. Both open with a barrier, so using
  // the two buffers in turn needs no other synchronization. SUM only in torch: AVG divides after.
  bool fast_allreduce(at::Tensor& t, const c10d::ReduceOp& reduce_op) {
    const auto op = reduce_op.op_;
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) return false;
    const auto dtype = t.scalar_type();
    // torch 2.11's one-shot kernel has no fp16 ("not implemented for 'Half'"): fp16 goes to NCCL.
    if (dtype != at::kFloat && dtype != at::kBFloat16) return false;
    const int64_t nbytes = t.numel() * t.element_size();
    if (nbytes == 0 || nbytes % 16 != 0 || !t.is_contiguous()) return false;
    const int path = route(kAllReduce, nbytes);
    std::optional<c10::OperatorHandle>* kernel = path == kOneShot ? &one_shot_ : path == kTwoShot ? &two_shot_ : nullptr;
    if (kernel == nullptr || !kernel->has_value()) return false;
    const auto key = std::make_tuple(path, static_cast<int>(dtype), nbytes);
    if (refused_.count(key)) return false;
    if (!ensure_buffers(t.device(), nbytes)) return false;

    at::Tensor staged = staged_view(dtype, nbytes);
    turn_ ^= 1;
    at::Tensor flat = t.dim() == 1 ? t : t.view({-1});
    // The kernels use 16-byte vector accesses; an offset view (which may differ per rank, so it
    // cannot choose the path) goes through aligned scratch with the same kernel.
    const bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
    at::Tensor in = flat, out = flat;
    if (!aligned) {
      in = scratch_.narrow(0, 0, nbytes).view(dtype);
      out = scratch_.narrow(0, capacity_, nbytes).view(dtype);
      in.copy_(flat);
    }
    torch::jit::Stack stack;
    stack.reserve(5);
    try {
      if (path == kOneShot) {
        stack.emplace_back(staged);
        stack.emplace_back(in);
        stack.emplace_back(sum_);
        stack.emplace_back(group_name_);
        stack.emplace_back(out);
      } else {
        staged.copy_(in);
        stack.emplace_back(staged);
        stack.emplace_back(sum_);
        stack.emplace_back(group_name_);
        stack.emplace_back(out);
      }
      (*kernel)->callBoxed(stack);
    } catch (const c10::Error& e) {
      // Host-side checks (dtype, size, alignment) see the same input on every rank, so every
      // rank refuses together and falls back to NCCL together.
      refused_.insert(key);
      TORCH_WARN_ONCE("smddp: symmetric-memory all_reduce refused an input (", e.what_without_backtrace(),
                      "); using NCCL for such inputs");
      return false;
    }
    if (!aligned) flat.copy_(out);
    if (op == c10d::ReduceOp::AVG) t.div_(size_);
    ++fast_calls_[path];
    return true;
  }

  c10::intrusive_ptr<c10d::Backend> nccl_;
  std::shared_ptr<PyRef> helper_;
  std::array<std::vector<std::pair<int64_t, int>>, kNumColl> routes_;
  std::array<std::optional<int>, kNumColl> forced_;
  std::optional<c10::OperatorHandle> one_shot_, two_shot_;
  std::set<std::tuple<int, int, int64_t>> refused_;
  std::array<at::Tensor, 2> buffers_;
  std::array<std::map<std::pair<int, int64_t>, at::Tensor>, 2> views_;
  at::Tensor scratch_;
  int64_t capacity_ = 0;
  int turn_ = 0;
  bool fast_off_ = false;
  bool coalescing_ = false;
  c10::IValue sum_{std::string("sum")};
  c10::IValue group_name_;
  std::array<int64_t, kNumPath> fast_calls_{};
#ifdef SMDDP_CE_NATIVE
  enum class CeMode { kUnknown, kNative, kPython, kOff };
  struct CeState {
    CeMode mode = CeMode::kUnknown;
    int64_t capacity = 0;  // bytes per buffer of the pair; 0: none held
    std::array<smddp_ce::CUdeviceptr, 2> bufs{};
    std::array<c10::intrusive_ptr<c10d::symmetric_memory::SymmetricMemory>, 2> handles;
    std::array<std::vector<smddp_ce::CUdeviceptr>, 2> peers;  // every rank's buffer, mapped here
    std::vector<void*> pulls;                                 // side streams (the helper owns them)
    void* local = nullptr;                                    // the own-chunk stream
    std::vector<void*> events;                                // fork, own-chunk join, one per pull stream
    void* done = nullptr;                                     // the end of the latest call
    void* ctx = nullptr;
    int splits = 1;
    bool serial = false;
    int turn = 0;
    std::optional<cudaStream_t> last;  // where the latest call ran
    at::Tensor version;                // fast_allgather.PartPlans.version
    int64_t plans_version = -1;
    std::unordered_map<int64_t, std::vector<std::pair<size_t, size_t>>> plans;
    int64_t calls = 0, host_ns = 0, parts = 0;  // ce_stats()
  } ce_;
#endif
#ifdef SMDDP_LAMPORT
  struct LamportState {
    at::Tensor buffer;  // this rank's symmetric buffer (the helper keeps the rendezvous alive)
    std::vector<void*> peers;
    at::Tensor ctrl;  // int32: call counter, finished blocks, timed out
    std::optional<c10::cuda::CUDAStream> stream;  // asynchronous calls
    std::optional<c10::cuda::CUDAStream> last;    // where the latest eager call ran
    cudaEvent_t fork = nullptr, join = nullptr;
    int64_t region_bytes = 0;
    int max_blocks = 1;
    unsigned long long timeout_ns = 0;
    bool off = false;
  } lamport_;
#endif
};

}  // namespace smddp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
#ifdef SMDDP_LAMPORT
  m.attr("LAMPORT") = true;  // built with lamport_allreduce.cu (routing.LAMPORT_ROUTES apply)
#else
  m.attr("LAMPORT") = false;
#endif
#ifdef SMDDP_CE_NATIVE
  m.attr("CE_NATIVE") = true;  // issues the copy-engine AllGather itself (no Python per call)
#else
  m.attr("CE_NATIVE") = false;
#endif
  py::class_<smddp::SmddpBackend, c10d::Backend, c10::intrusive_ptr<smddp::SmddpBackend>>(m, "SmddpBackend")
      .def(py::init([](int rank, int size, const c10::intrusive_ptr<c10d::Backend>& nccl, py::object helper,
                       const std::vector<std::tuple<int, int64_t, int>>& routes) {
             return c10::make_intrusive<smddp::SmddpBackend>(rank, size, nccl, std::move(helper), routes);
           }),
           py::arg("rank"), py::arg("size"), py::arg("nccl"), py::arg("helper"), py::arg("routes"))
      .def("force", &smddp::SmddpBackend::force, py::arg("collective"), py::arg("path"))
      .def("unforce", &smddp::SmddpBackend::unforce, py::arg("collective"))
      .def("route", &smddp::SmddpBackend::route_code, py::arg("collective"), py::arg("nbytes"))
      .def("fast_calls", &smddp::SmddpBackend::fast_calls)
      .def("ce_stats", &smddp::SmddpBackend::ce_stats)
      .def("helper", &smddp::SmddpBackend::helper_object)
      .def("lamport_timeouts", &smddp::SmddpBackend::lamport_timeouts);
}
