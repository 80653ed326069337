// smddp copy-engine AllGather: the per-call copy/event choreography in one native call.
//
// Issued through the CUDA *driver* API (dlopen'd libcuda.so.1, so no CUDA toolkit is needed to
// build this and no second CUDA runtime is loaded next to torch's). Python's version of the same
// choreography (fast_allgather.py) costs ~100-200 us of CPU per call in torch op overheads, which
// is longer than the copies themselves below ~64 MiB; this one costs a few microseconds.
//
// Build: c++ -O2 -shared -fPIC ce_pull.cpp -o libsmddp_ce.so -ldl   (done on first use by native.py)
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef int CUresult;
typedef void* CUstream;
typedef void* CUevent;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;

// cuMemcpyDtoDAsync, not the UVA cuMemcpyAsync: the latter looks up which context owns each
// pointer, and for peer memory imported through the VMM API (symmetric memory) that lookup
// crashed the driver in our first device run; DtoD takes both as plain device addresses.
static CUresult (*p_memcpy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
static CUresult (*p_record)(CUevent, CUstream) = nullptr;
static CUresult (*p_wait)(CUstream, CUevent, unsigned int) = nullptr;
static CUresult (*p_ev_create)(CUevent*, unsigned int) = nullptr;
static CUresult (*p_ctx_get)(CUcontext*) = nullptr;
static CUresult (*p_ctx_set)(CUcontext) = nullptr;

enum { SMDDP_ERR_DLOPEN = -1, SMDDP_ERR_DLSYM = -2, SMDDP_ERR_ARGS = -3 };

// Resolve the driver entry points once. Returns 0 or a negative smddp error.
int smddp_ce_init(void) {
  if (p_memcpy) return 0;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return SMDDP_ERR_DLOPEN;
  p_memcpy = (CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))dlsym(lib, "cuMemcpyDtoDAsync_v2");
  p_record = (CUresult(*)(CUevent, CUstream))dlsym(lib, "cuEventRecord");
  p_wait = (CUresult(*)(CUstream, CUevent, unsigned int))dlsym(lib, "cuStreamWaitEvent");
  p_ev_create = (CUresult(*)(CUevent*, unsigned int))dlsym(lib, "cuEventCreate");
  p_ctx_get = (CUresult(*)(CUcontext*))dlsym(lib, "cuCtxGetCurrent");
  p_ctx_set = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
  if (!p_memcpy || !p_record || !p_wait || !p_ev_create || !p_ctx_get || !p_ctx_set) {
    p_memcpy = nullptr;
    return SMDDP_ERR_DLSYM;
  }
  return 0;
}

// The calling thread's current context (torch made it current); kept to re-bind on other threads.
int smddp_ce_current_context(CUcontext* out) { return p_ctx_get(out); }

// n timing-free events (CU_EVENT_DISABLE_TIMING = 2).
int smddp_ce_make_events(int n, CUevent* out) {
  for (int i = 0; i < n; ++i) {
    CUresult r = p_ev_create(&out[i], 2);
    if (r) return r;
  }
  return 0;
}

static CUresult bind(CUcontext ctx) {
  CUcontext cur = nullptr;
  CUresult r = p_ctx_get(&cur);
  if (r) return r;
  return cur == ctx ? 0 : p_ctx_set(ctx);  // autograd threads may have no current context
}

// [start, start+len) inside [0, nbytes), written so that no size_t sum can wrap past the check.
static int part_inside(size_t nbytes, size_t start, size_t len) { return start <= nbytes && len <= nbytes - start; }

#define CHECK(x)            \
  do {                      \
    CUresult r_ = (x);      \
    if (r_) return r_;      \
  } while (0)

// Pipelined in parts (smddp_ce_stage_part / smddp_ce_pull_part / smddp_ce_join): the staging copy of
// part k+1 (local HBM, on `main`) runs while the pull of part k (NVLink, side streams) is in flight,
// instead of the whole staging copy before the first pull. Per part, between the two calls, the
// caller runs one symmetric-memory barrier on `main` (the peers staged that part). events needs
// 2 + n_streams entries: 0 fork, 1 own-chunk join, then one per pull stream (recorded at the join).

// Stage in[start, start+len) -> local_buf[start, ...) on `main`. With `first`, also fork `local` off
// `main` and copy the own chunk out[rank] = in on it (events[0] fork, events[1] its join).
int smddp_ce_stage_part(CUcontext ctx, CUstream main, CUstream local, CUevent* events, CUdeviceptr out,
                        CUdeviceptr in, CUdeviceptr local_buf, size_t nbytes, size_t start, size_t len, int rank,
                        int first) {
  if (!part_inside(nbytes, start, len)) return SMDDP_ERR_ARGS;
  CHECK(bind(ctx));
  if (first) {
    CHECK(p_record(events[0], main));
    CHECK(p_wait(local, events[0], 0));
    // In place (FSDP2 gathers into the output whose rank chunk is the input): nothing to copy.
    if (out + (CUdeviceptr)rank * nbytes != in) CHECK(p_memcpy(out + (CUdeviceptr)rank * nbytes, in, nbytes, local));
    CHECK(p_record(events[1], local));
  }
  if (len) CHECK(p_memcpy(local_buf + start, in + start, len, main));
  return 0;
}

// Pull [start, start+len) of every peer's staged chunk (after this part's barrier on `main`), split in
// `splits` pieces, piece k of peer step j on streams[(j-1)*splits+k] (or all on streams[0] when
// `serial`: measured faster on 4 GPUs, where concurrent pulls from 3 peers contend). No join.
int smddp_ce_pull_part(CUcontext ctx, CUstream main, const CUstream* streams, CUevent* events, CUdeviceptr out,
                       const CUdeviceptr* peer_bufs, size_t nbytes, size_t start, size_t len, int rank, int world,
                       int splits, int serial) {
  if (world < 2 || splits < 1 || rank < 0 || rank >= world || !part_inside(nbytes, start, len)) {
    return SMDDP_ERR_ARGS;
  }
  if (len == 0) return 0;
  CHECK(bind(ctx));
  CHECK(p_record(events[0], main));
  size_t piece = len / splits + (len % splits != 0);  // rounded up without len + splits - 1 wrapping
  int s = 0;
  for (int step = 1; step < world; ++step) {
    int peer = (rank + step) % world;  // staggered so no peer serves everyone at once
    CUdeviceptr dst = out + (CUdeviceptr)peer * nbytes;
    for (size_t off = start; off < start + len; off += piece) {
      size_t n = start + len - off < piece ? start + len - off : piece;
      CUstream st = streams[serial ? 0 : s];
      if (!serial || s == 0) CHECK(p_wait(st, events[0], 0));
      CHECK(p_memcpy(dst + off, peer_bufs[peer] + off, n, st));
      if (!serial || s == 0) ++s;
    }
  }
  return 0;
}

// `main` waits for every pull stream (all n_streams: a short last part may not have used them all)
// and for the own-chunk copy.
int smddp_ce_join(CUcontext ctx, CUstream main, const CUstream* streams, int n_streams, CUevent* events) {
  CHECK(bind(ctx));
  for (int i = 0; i < n_streams; ++i) {
    CHECK(p_record(events[2 + i], streams[i]));
    CHECK(p_wait(main, events[2 + i], 0));
  }
  CHECK(p_wait(main, events[1], 0));
  return 0;
}

// The unpipelined call in two phases (one part): phase 1 before the barrier, phase 2 after it.
int smddp_ce_stage(CUcontext ctx, CUstream main, CUstream local, CUevent* events, CUdeviceptr out,
                   CUdeviceptr in, CUdeviceptr local_buf, size_t nbytes, int rank) {
  return smddp_ce_stage_part(ctx, main, local, events, out, in, local_buf, nbytes, 0, nbytes, rank, 1);
}

int smddp_ce_pull(CUcontext ctx, CUstream main, const CUstream* streams, CUevent* events,
                  CUdeviceptr out, const CUdeviceptr* peer_bufs, size_t nbytes, int rank, int world,
                  int splits, int serial) {
  int r = smddp_ce_pull_part(ctx, main, streams, events, out, peer_bufs, nbytes, 0, nbytes, rank, world, splits,
                             serial);
  if (r) return r;
  return smddp_ce_join(ctx, main, streams, serial ? 1 : (world - 1) * splits, events);
}

}  // extern "C"
