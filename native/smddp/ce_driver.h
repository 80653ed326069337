// smddp copy-engine AllGather: the per-part copy/event choreography through the CUDA driver API.
//
// Shared by the ctypes helper (ce_pull.cpp, for the Python process group) and the native c10d backend
// (smddp_backend.cpp, which issues a whole AllGather in one C++ call). The driver is dlopen'd
// (libcuda.so.1, already loaded by torch): no CUDA toolkit is needed and no second CUDA runtime is loaded.
#pragma once

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

namespace smddp_ce {

typedef int CUresult;
typedef void* CUstream;
typedef void* CUevent;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;

enum { SMDDP_ERR_DLOPEN = -1, SMDDP_ERR_DLSYM = -2, SMDDP_ERR_ARGS = -3 };

struct Driver {
  // cuMemcpyDtoDAsync, not the UVA cuMemcpyAsync: the latter looks up which context owns each
  // pointer, and for peer memory imported through the VMM API (symmetric memory) that lookup
  // crashed the driver in our first device run; DtoD takes both as plain device addresses.
  CUresult (*memcpy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*record)(CUevent, CUstream) = nullptr;
  CUresult (*wait)(CUstream, CUevent, unsigned int) = nullptr;
  CUresult (*ev_create)(CUevent*, unsigned int) = nullptr;
  CUresult (*ctx_get)(CUcontext*) = nullptr;
  CUresult (*ctx_set)(CUcontext) = nullptr;
};

// One table per shared object that includes this header (inline: one definition per .so).
inline Driver& driver() {
  static Driver d;
  return d;
}

// Resolve the driver entry points once. Returns 0 or a negative smddp error.
inline int init() {
  Driver& d = driver();
  if (d.memcpy) return 0;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return SMDDP_ERR_DLOPEN;
  Driver got;
  got.memcpy = (CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))dlsym(lib, "cuMemcpyDtoDAsync_v2");
  got.record = (CUresult(*)(CUevent, CUstream))dlsym(lib, "cuEventRecord");
  got.wait = (CUresult(*)(CUstream, CUevent, unsigned int))dlsym(lib, "cuStreamWaitEvent");
  got.ev_create = (CUresult(*)(CUevent*, unsigned int))dlsym(lib, "cuEventCreate");
  got.ctx_get = (CUresult(*)(CUcontext*))dlsym(lib, "cuCtxGetCurrent");
  got.ctx_set = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
  if (!got.memcpy || !got.record || !got.wait || !got.ev_create || !got.ctx_get || !got.ctx_set) {
    return SMDDP_ERR_DLSYM;
  }
  d = got;
  return 0;
}

// The calling thread's current context (torch made it current); kept to re-bind on other threads.
inline int current_context(CUcontext* out) { return driver().ctx_get(out); }

// n timing-free events (CU_EVENT_DISABLE_TIMING = 2).
inline int make_events(int n, CUevent* out) {
  for (int i = 0; i < n; ++i) {
    CUresult r = driver().ev_create(&out[i], 2);
    if (r) return r;
  }
  return 0;
}

inline CUresult bind(CUcontext ctx) {
  CUcontext cur = nullptr;
  CUresult r = driver().ctx_get(&cur);
  if (r) return r;
  return cur == ctx ? 0 : driver().ctx_set(ctx);  // autograd threads may have no current context
}

// [start, start+len) inside [0, nbytes), written so that no size_t sum can wrap past the check.
inline int part_inside(size_t nbytes, size_t start, size_t len) { return start <= nbytes && len <= nbytes - start; }

#define SMDDP_CE_CHECK(x) \
  do {                    \
    CUresult r_ = (x);    \
    if (r_) return r_;    \
  } while (0)

// Pipelined in parts (stage_part / pull_part / join): the staging copy of part k+1 (local HBM, on
// `main`) runs while the pull of part k (NVLink, side streams) is in flight, instead of the whole
// staging copy before the first pull. Per part, between the two calls, the caller runs one
// symmetric-memory barrier on `main` (the peers staged that part). events needs 2 + n_streams
// entries: 0 fork, 1 own-chunk join, then one per pull stream (recorded at the join).

// Stage in[start, start+len) -> local_buf[start, ...) on `main`. With `first`, then fork `local` off
// `main` and copy the own chunk out[rank] = in on it (events[0] fork, events[1] its join): forked after
// the first part's staging, so that copy (on the critical path: every peer's first pull waits for it)
// has the HBM to itself, and the own chunk's copy overlaps the barrier and the pulls instead.
inline int stage_part(CUcontext ctx, CUstream main, CUstream local, CUevent* events, CUdeviceptr out, CUdeviceptr in,
                      CUdeviceptr local_buf, size_t nbytes, size_t start, size_t len, int rank, int first) {
  if (!part_inside(nbytes, start, len)) return SMDDP_ERR_ARGS;
  const Driver& d = driver();
  SMDDP_CE_CHECK(bind(ctx));
  if (len) SMDDP_CE_CHECK(d.memcpy(local_buf + start, in + start, len, main));
  if (first) {
    SMDDP_CE_CHECK(d.record(events[0], main));
    SMDDP_CE_CHECK(d.wait(local, events[0], 0));
    // In place (FSDP2 gathers into the output whose rank chunk is the input): nothing to copy.
    if (out + (CUdeviceptr)rank * nbytes != in) {
      SMDDP_CE_CHECK(d.memcpy(out + (CUdeviceptr)rank * nbytes, in, nbytes, local));
    }
    SMDDP_CE_CHECK(d.record(events[1], local));
  }
  return 0;
}

// Pull [start, start+len) of every peer's staged chunk (after this part's barrier on `main`), split in
// `splits` pieces, piece k of peer step j on streams[(j-1)*splits+k] (or all on streams[0] when
// `serial`: measured faster on 4 GPUs, where concurrent pulls from 3 peers contend). No join.
inline int pull_part(CUcontext ctx, CUstream main, const CUstream* streams, CUevent* events, CUdeviceptr out,
                     const CUdeviceptr* peer_bufs, size_t nbytes, size_t start, size_t len, int rank, int world,
                     int splits, int serial) {
  if (world < 2 || splits < 1 || rank < 0 || rank >= world || !part_inside(nbytes, start, len)) {
    return SMDDP_ERR_ARGS;
  }
  if (len == 0) return 0;
  const Driver& d = driver();
  SMDDP_CE_CHECK(bind(ctx));
  SMDDP_CE_CHECK(d.record(events[0], main));
  size_t piece = len / splits + (len % splits != 0);  // rounded up without len + splits - 1 wrapping
  int s = 0;
  for (int step = 1; step < world; ++step) {
    int peer = (rank + step) % world;  // staggered so no peer serves everyone at once
    CUdeviceptr dst = out + (CUdeviceptr)peer * nbytes;
    for (size_t off = start; off < start + len; off += piece) {
      size_t n = start + len - off < piece ? start + len - off : piece;
      CUstream st = streams[serial ? 0 : s];
      if (!serial || s == 0) SMDDP_CE_CHECK(d.wait(st, events[0], 0));
      SMDDP_CE_CHECK(d.memcpy(dst + off, peer_bufs[peer] + off, n, st));
      if (!serial || s == 0) ++s;
    }
  }
  return 0;
}

// `main` waits for every pull stream (all n_streams: a short last part may not have used them all)
// and for the own-chunk copy.
inline int join(CUcontext ctx, CUstream main, const CUstream* streams, int n_streams, CUevent* events) {
  const Driver& d = driver();
  SMDDP_CE_CHECK(bind(ctx));
  for (int i = 0; i < n_streams; ++i) {
    SMDDP_CE_CHECK(d.record(events[2 + i], streams[i]));
    SMDDP_CE_CHECK(d.wait(main, events[2 + i], 0));
  }
  SMDDP_CE_CHECK(d.wait(main, events[1], 0));
  return 0;
}

}  // namespace smddp_ce
