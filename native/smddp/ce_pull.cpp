// smddp copy-engine AllGather: the per-call copy/event choreography as a C library for ctypes.
//
// The Python process group (fast_allgather.py) calls these; the choreography itself is in
// ce_driver.h, which the native c10d backend (smddp_backend.cpp) shares. Python's version of the
// same choreography costs ~100-200 us of CPU per call in torch op overheads, which is longer than
// the copies themselves below ~64 MiB; this one costs a few microseconds per part.
//
// Build: c++ -O2 -shared -fPIC ce_pull.cpp -o libsmddp_ce.so -ldl   (done on first use by native.py)
#include "ce_driver.h"

using namespace smddp_ce;

extern "C" {

// Resolve the driver entry points once. Returns 0 or a negative smddp error.
int smddp_ce_init(void) { return init(); }

int smddp_ce_current_context(CUcontext* out) { return current_context(out); }

int smddp_ce_make_events(int n, CUevent* out) { return make_events(n, out); }

int smddp_ce_stage_part(CUcontext ctx, CUstream main, CUstream local, CUevent* events, CUdeviceptr out,
                        CUdeviceptr in, CUdeviceptr local_buf, size_t nbytes, size_t start, size_t len, int rank,
                        int first) {
  return stage_part(ctx, main, local, events, out, in, local_buf, nbytes, start, len, rank, first);
}

int smddp_ce_pull_part(CUcontext ctx, CUstream main, const CUstream* streams, CUevent* events, CUdeviceptr out,
                       const CUdeviceptr* peer_bufs, size_t nbytes, size_t start, size_t len, int rank, int world,
                       int splits, int serial) {
  return pull_part(ctx, main, streams, events, out, peer_bufs, nbytes, start, len, rank, world, splits, serial);
}

int smddp_ce_join(CUcontext ctx, CUstream main, const CUstream* streams, int n_streams, CUevent* events) {
  return join(ctx, main, streams, n_streams, events);
}

// The unpipelined call in two phases (one part): phase 1 before the barrier, phase 2 after it.
int smddp_ce_stage(CUcontext ctx, CUstream main, CUstream local, CUevent* events, CUdeviceptr out,
                   CUdeviceptr in, CUdeviceptr local_buf, size_t nbytes, int rank) {
  return stage_part(ctx, main, local, events, out, in, local_buf, nbytes, 0, nbytes, rank, 1);
}

int smddp_ce_pull(CUcontext ctx, CUstream main, const CUstream* streams, CUevent* events,
                  CUdeviceptr out, const CUdeviceptr* peer_bufs, size_t nbytes, int rank, int world,
                  int splits, int serial) {
  int r = pull_part(ctx, main, streams, events, out, peer_bufs, nbytes, 0, nbytes, rank, world, splits, serial);
  if (r) return r;
  return join(ctx, main, streams, serial ? 1 : (world - 1) * splits, events);
}

}  // extern "C"
