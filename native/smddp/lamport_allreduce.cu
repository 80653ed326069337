// smddp's own small-message AllReduce: a Lamport-style one-shot kernel over symmetric memory.
//
// torch's symmetric-memory one-shot opens with a barrier kernel step and closes with another
// (about as slow as NCCL's kernel inside a CUDA graph on H100). Here there is no barrier: every
// rank stores its input straight into each peer's buffer, and a slot still holding the sentinel
// (all bits set, a NaN in every supported dtype) means "not arrived yet". Each rank polls its own
// buffer until no sentinel is left, reduces in registers (fp32, ranks always in the same order,
// so every rank gets bit-identical results), writes the output and puts the sentinel back.
//
// Layout of each rank's buffer: [slot 0..1][source rank 0..world-1][region_bytes]. The slot is
// chosen by a counter in device memory (ctrl[0]), advanced by the last block of each call, so a
// replayed CUDA graph rotates slots like eager calls do. Two slots suffice: a peer writes slot s
// again only two calls later, after it received this rank's data of the call in between, which
// this rank stored only after its previous kernel (reads and sentinel reset of slot s) had ended.
// Calls of one group must run one after the other, in issue order (smddp_backend.cpp orders them).
//
// Only CUDA runtime headers: the backend (smddp_backend.cpp) calls lamport_allreduce().
#include <cuda_runtime.h>

#include <cassert>
#include <cstdint>
#include <cstdio>

namespace smddp_lamport {

constexpr int kThreads = 512;
constexpr int kMaxRanks = 8;
constexpr unsigned kAllOnes = 0xFFFFFFFFu;

struct PeerPtrs {
  uint4* p[kMaxRanks];
};

// kind: 0 = float32 (4 lanes of 32 bits), 1 = bfloat16, 2 = float16 (8 lanes of 16 bits)
template <int K>
struct Lanes {
  static constexpr int n = K == 0 ? 4 : 8;
};

__device__ __forceinline__ uint4 ld_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void st_volatile(uint4* p, const uint4& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int K>
__device__ __forceinline__ bool word_arrived(unsigned w) {
  if (K == 0) return w != kAllOnes;
  return (w & 0xFFFFu) != 0xFFFFu && (w >> 16) != 0xFFFFu;
}

template <int K>
__device__ __forceinline__ bool arrived(const uint4& v) {
  return word_arrived<K>(v.x) && word_arrived<K>(v.y) && word_arrived<K>(v.z) && word_arrived<K>(v.w);
}

// An input whose bits equal the sentinel is a NaN: send another NaN so it cannot read as "not arrived".
template <int K>
__device__ __forceinline__ unsigned canonical_word(unsigned w) {
  if (K == 0) return w == kAllOnes ? 0x7FFFFFFFu : w;
  const unsigned lo = (w & 0xFFFFu) == 0xFFFFu ? 0x7FFFu : (w & 0xFFFFu);
  const unsigned hi = (w >> 16) == 0xFFFFu ? 0x7FFFu : (w >> 16);
  return lo | (hi << 16);
}

template <int K>
__device__ __forceinline__ uint4 canonical(const uint4& v) {
  return make_uint4(canonical_word<K>(v.x), canonical_word<K>(v.y), canonical_word<K>(v.z), canonical_word<K>(v.w));
}

template <int K>
__device__ __forceinline__ float half_to_float(unsigned bits) {
  if (K == 1) return __uint_as_float(bits << 16);
  float f;
  const unsigned short h = static_cast<unsigned short>(bits);
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

template <int K>
__device__ __forceinline__ unsigned float_to_half(float f) {
  if (K == 1) {
    // round to nearest even; NaN stays a (quiet) NaN
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) | 0x40u) & 0xFFFFu;
    return ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) & 0xFFFFu;
  }
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

template <int K>
__device__ __forceinline__ void unpack(const uint4& v, float (&f)[Lanes<K>::n]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (K == 0) {
      f[j] = __uint_as_float(w[j]);
    } else {
      f[2 * j] = half_to_float<K>(w[j] & 0xFFFFu);
      f[2 * j + 1] = half_to_float<K>(w[j] >> 16);
    }
  }
}

template <int K>
__device__ __forceinline__ uint4 pack(const float (&f)[Lanes<K>::n]) {
  unsigned w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (K == 0) {
      w[j] = __float_as_uint(f[j]);
    } else {
      w[j] = float_to_half<K>(f[2 * j]) | (float_to_half<K>(f[2 * j + 1]) << 16);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The last vector may be partial (tail bytes of a size that is not a multiple of 16): its
// missing bytes read as zero, a value and not the sentinel, and are never written out.
__device__ __forceinline__ uint4 load_input(const uint4* in, int64_t i, int64_t last, int tail) {
  if (tail == 0 || i != last) return in[i];
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  const unsigned char* src = reinterpret_cast<const unsigned char*>(in + i);
  unsigned char* dst = reinterpret_cast<unsigned char*>(&v);
  for (int b = 0; b < tail; ++b) dst[b] = src[b];
  return v;
}

__device__ __forceinline__ void store_output(uint4* out, int64_t i, int64_t last, int tail, const uint4& v) {
  if (tail == 0 || i != last) {
    out[i] = v;
    return;
  }
  const unsigned char* src = reinterpret_cast<const unsigned char*>(&v);
  unsigned char* dst = reinterpret_cast<unsigned char*>(out + i);
  for (int b = 0; b < tail; ++b) dst[b] = src[b];
}

// ctrl: [0] call counter (slot = counter & 1), [1] blocks finished in this call, [2] timed out.
template <int K>
__global__ void __launch_bounds__(kThreads) lamport_kernel(const uint4* in, uint4* out, int64_t nvec, int tail,
                                                           PeerPtrs peers, int rank, int world, int64_t region_vec,
                                                           unsigned* ctrl, float scale, unsigned long long timeout_ns) {
  const unsigned call = *reinterpret_cast<volatile unsigned*>(&ctrl[0]);
  const int64_t slot_base = static_cast<int64_t>(call & 1u) * world * region_vec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t last = nvec - 1;

  // 1. push: this rank's input into region [slot][rank] of every peer
  const int64_t mine = slot_base + static_cast<int64_t>(rank) * region_vec;
  for (int64_t i = first; i < nvec; i += stride) {
    const uint4 v = canonical<K>(load_input(in, i, last, tail));
#pragma unroll
    for (int p = 0; p < kMaxRanks; ++p) {  // constant indices keep the pointers in registers
      if (p < world && p != rank) st_volatile(peers.p[p] + mine + i, v);
    }
  }

  // 2. pull: wait for every peer's vector in the local buffer, reduce in rank order, reset
  uint4* local = peers.p[0];
#pragma unroll
  for (int p = 1; p < kMaxRanks; ++p) {
    if (p == rank) local = peers.p[p];
  }
  const unsigned long long start = global_ns();
  for (int64_t i = first; i < nvec; i += stride) {
    float acc[Lanes<K>::n];
    for (int r = 0; r < world; ++r) {
      uint4 v;
      if (r == rank) {
        v = load_input(in, i, last, tail);
      } else {
        const uint4* src = local + slot_base + static_cast<int64_t>(r) * region_vec + i;
        unsigned spins = 0;
        for (v = ld_volatile(src); !arrived<K>(v); v = ld_volatile(src)) {
          // A late peer (ranks drift by hundreds of us in a host-bound step): back off, so that
          // tens of thousands of polling threads leave L2 to the compute running beside them.
          if (++spins > 32) __nanosleep(256);
          // A peer that never comes: stop the whole context (as NCCL's watchdog would) rather
          // than hang the stream forever, saying why (the context's memory, ctrl[2] included,
          // is unreadable afterwards). The first thread to time out prints one line and raises
          // a device-side assert ("device-side assert triggered" on the host, not a bare launch
          // failure); the others wait for it to end the kernel.
          if ((spins & 1023u) == 0 && global_ns() - start > timeout_ns) {
            if (atomicExch(&ctrl[2], 1u) == 0u) {
              printf("smddp: Lamport AllReduce on rank %d waited more than %.1f s for rank %d (call %u, "
                     "SMDDP_LAMPORT_TIMEOUT_S): a peer died or skipped the collective; stopping the CUDA context\n",
                     rank, static_cast<double>(timeout_ns) * 1e-9, r, call);
              __assert_fail("smddp Lamport AllReduce: a peer did not arrive in time (SMDDP_LAMPORT_TIMEOUT_S)",
                            __FILE__, __LINE__, __func__);
              __trap();
            }
            for (;;) __nanosleep(1u << 20);
          }
        }
      }
      float f[Lanes<K>::n];
      unpack<K>(v, f);
#pragma unroll
      for (int j = 0; j < Lanes<K>::n; ++j) acc[j] = r == 0 ? f[j] : acc[j] + f[j];
    }
#pragma unroll
    for (int j = 0; j < Lanes<K>::n; ++j) acc[j] *= scale;
    store_output(out, i, last, tail, pack<K>(acc));
    for (int r = 0; r < world; ++r) {
      if (r != rank) local[slot_base + static_cast<int64_t>(r) * region_vec + i] = make_uint4(kAllOnes, kAllOnes, kAllOnes, kAllOnes);
    }
  }

  // 3. the last block to finish advances the call counter (every block read it at its start)
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned done = atomicAdd(&ctrl[1], 1u);
    if (done == gridDim.x - 1) {
      ctrl[1] = 0u;
      __threadfence();
      atomicAdd(&ctrl[0], 1u);
    }
  }
}

}  // namespace smddp_lamport

namespace smddp {

// in/out 16-byte aligned (may be the same tensor), nbytes a multiple of the element size and at
// most region_bytes; peers: world buffer addresses (this rank's own at [rank]), each
// 2 * world * region_bytes long and filled with 0xFF before the first call.
cudaError_t lamport_allreduce(const void* in, void* out, int64_t nbytes, int kind, void* const* peers, int rank,
                              int world, int64_t region_bytes, unsigned* ctrl, float scale, int max_blocks,
                              unsigned long long timeout_ns, cudaStream_t stream) {
  using namespace smddp_lamport;
  if (world < 2 || world > kMaxRanks || rank < 0 || rank >= world || nbytes <= 0 || nbytes > region_bytes ||
      region_bytes % 16 != 0 || max_blocks < 1) {
    return cudaErrorInvalidValue;
  }
  PeerPtrs pp{};
  for (int r = 0; r < world; ++r) pp.p[r] = static_cast<uint4*>(peers[r]);
  const int64_t nvec = (nbytes + 15) / 16;
  const int tail = static_cast<int>(nbytes % 16);
  const int64_t wanted = (nvec + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < max_blocks ? wanted : max_blocks);
  const auto* src = static_cast<const uint4*>(in);
  auto* dst = static_cast<uint4*>(out);
  const int64_t region_vec = region_bytes / 16;
  switch (kind) {
    case 0:
      lamport_kernel<0><<<blocks, kThreads, 0, stream>>>(src, dst, nvec, tail, pp, rank, world, region_vec, ctrl,
                                                          scale, timeout_ns);
      break;
    case 1:
      lamport_kernel<1><<<blocks, kThreads, 0, stream>>>(src, dst, nvec, tail, pp, rank, world, region_vec, ctrl,
                                                          scale, timeout_ns);
      break;
    case 2:
      lamport_kernel<2><<<blocks, kThreads, 0, stream>>>(src, dst, nvec, tail, pp, rank, world, region_vec, ctrl,
                                                          scale, timeout_ns);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace smddp
