// A small emulation of CUDA's execution model on the CPU, for tests that run the cuda backend's
// kernels without a GPU (tests/test_cuda_attention_emu.py): compile a kernel source with g++
// -std=c++20 after this header, launch with emu_launch. A block's threads are OS threads that run
// the kernel body; __syncthreads and __syncwarp are barriers (a thread that returns leaves them);
// warp shuffles and the warp-wide matrix instructions exchange values through per-warp slots.
// Blocks run one after another, so `__shared__` arrays are plain statics, and the dynamic shared
// memory is one buffer, filled with a NaN pattern before each block and followed by a guard
// region that emu_launch checks afterwards.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

thread_local dim3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

struct EmuBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<unsigned long long> slots;          // 32 x 8 values a warp
};
inline EmuBlock* emu_block = nullptr;
inline char* emu_dyn_smem = nullptr;

inline void __syncthreads() { emu_block->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    emu_block->warps[threadIdx.x >> 5]->arrive_and_wait();
}

// lane l's values vals[0..n) to every lane of the warp: out(src lane, i)
template <typename T, int N>
inline void emu_warp_exchange(const T (&vals)[N], T (*all)[N]) {
    static_assert(sizeof(T) <= 8 && N <= 8, "slot size");
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    unsigned long long* s = emu_block->slots.data() + (size_t)w * 32 * 8;
    for (int i = 0; i < N; ++i) std::memcpy(&s[l * 8 + i], &vals[i], sizeof(T));
    __syncwarp();
    for (int src = 0; src < 32; ++src)
        for (int i = 0; i < N; ++i) std::memcpy(&all[src][i], &s[src * 8 + i], sizeof(T));
    __syncwarp();
}

template <typename T> inline T __shfl_xor_sync(unsigned, T v, int m) {
    T in[1] = {v}, all[32][1];
    emu_warp_exchange<T, 1>(in, all);
    return all[(threadIdx.x & 31) ^ m][0];
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) {
    T in[1] = {v}, all[32][1];
    emu_warp_exchange<T, 1>(in, all);
    return all[src & 31][0];
}

// Run `body` as a kernel: grid (gx, gy) of blocks of bx threads, `smem` bytes of dynamic shared
// memory. Returns false when a thread wrote past the dynamic shared memory.
inline bool emu_launch(unsigned gx, unsigned gy, unsigned bx, size_t smem,
                       const std::function<void()>& body) {
    const size_t guard = 4096;
    std::vector<unsigned> buf((smem + guard) / 4 + 1);
    gridDim = dim3{gx, gy, 1};
    blockDim = dim3{bx, 1, 1};
    bool ok = true;
    for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
            for (auto& u : buf) u = 0x7fc0dead;         // a NaN: reading unwritten memory shows
            emu_dyn_smem = (char*)buf.data();
            EmuBlock blk;
            blk.block = std::make_unique<std::barrier<>>(bx);
            for (unsigned w = 0; w < (bx + 31) / 32; ++w)
                blk.warps.push_back(std::make_unique<std::barrier<>>(std::min(32u, bx - 32 * w)));
            blk.slots.assign((size_t)((bx + 31) / 32) * 32 * 8, 0);
            emu_block = &blk;
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < bx; ++t)
                ts.emplace_back([&, t] {
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{x, y, 0};
                    body();
                    blk.warps[t >> 5]->arrive_and_drop();
                    blk.block->arrive_and_drop();
                });
            for (auto& th : ts) th.join();
            const unsigned* g = buf.data() + (smem + 3) / 4;
            for (size_t i = 0; i < guard / 4; ++i) ok = ok && g[i] == 0x7fc0dead;
        }
    return ok;
}

// a kernel called with its arguments as 8-byte values (pointers, int64, double), as launched
template <typename... A, size_t... I>
inline void emu_call_impl(void (*k)(A...), void** a, std::index_sequence<I...>) {
    k(*(A*)a[I]...);
}
template <typename... A> inline void emu_call(void (*k)(A...), void** a) {
    emu_call_impl(k, a, std::index_sequence_for<A...>{});
}

// what kernels.cu defines before the attention sources (its IO<S> uses PTX for float16)
typedef unsigned short half_t;
template <typename S> struct IO;
template <> struct IO<float> {
    typedef float C;
    static float ld(float x) { return x; }
    static float st(float x) { return x; }
};
template <> struct IO<double> {
    typedef double C;
    static double ld(double x) { return x; }
    static double st(double x) { return x; }
};
template <> struct IO<half_t> {
    typedef float C;
    static float ld(half_t h) { _Float16 f; std::memcpy(&f, &h, 2); return (float)f; }
    static half_t st(float x) {
        _Float16 f = (_Float16)x;
        half_t h;
        std::memcpy(&h, &f, 2);
        return h;
    }
};
// single-precision operations rounded on their own (the host compiles them at -O0 as SSE
// instructions: IEEE float, no contraction into FMAs), and expm1f
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float expm1f(float a) { return std::expm1(a); }
inline float m_exp(float x) { return std::exp(x); }
inline double m_exp(double x) { return std::exp(x); }

// the warp-wide matrix instructions of attention_mma.cu, from their PTX definitions
#define ATT_EMULATED 1
inline void emu_ldsm4(unsigned (&r)[4], const void* p, bool trans) {
    // lanes 8 i .. 8 i + 7 give the row addresses of 8 x 8 matrix i; lane l = 4 g + t receives
    // (row g, columns 2 t, 2 t + 1), or with .trans (rows 2 t, 2 t + 1, column g)
    unsigned long long in[1] = {(unsigned long long)p}, all[32][1];
    emu_warp_exchange<unsigned long long, 1>(in, all);
    const int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; ++i) {
        auto row = [&](int rr) { return (const unsigned short*)all[8 * i + rr][0]; };
        const unsigned lo = trans ? row(2 * t)[g] : row(g)[2 * t];
        const unsigned hi = trans ? row(2 * t + 1)[g] : row(g)[2 * t + 1];
        r[i] = lo | (hi << 16);
    }
}
inline void att_ldsm4(unsigned (&r)[4], const void* p) { emu_ldsm4(r, p, false); }
inline void att_ldsm4_t(unsigned (&r)[4], const void* p) { emu_ldsm4(r, p, true); }

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 with groupID g = lane / 4, t = lane % 4:
// A's element i of a lane (2 a register) at row g + 8 ((i / 2) % 2), column 2 t + i % 2 + 8 (i / 4);
// B's at row (k) 2 t + i % 2 + 8 (i / 2), column g; C's at row g + 8 (i / 2), column 2 t + i % 2
inline void att_mma_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    unsigned in[10] = {a[0], a[1], a[2], a[3], b0, b1}, all[32][10];   // one exchange: 5 slots
    std::memcpy(in + 6, c, sizeof(float) * 4);
    unsigned long long slots[5], got[32][5];
    std::memcpy(slots, in, sizeof(slots));
    emu_warp_exchange<unsigned long long, 5>(slots, got);
    std::memcpy(all, got, sizeof(all));
    auto h = [](unsigned reg, int i) { return IO<half_t>::ld((half_t)(reg >> (16 * (i & 1)))); };
    float A[16][16], B[16][8], C[16][8];
    for (int L = 0; L < 32; ++L) {
        const int g = L >> 2, t = L & 3;
        for (int i = 0; i < 8; ++i)
            A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] = h(all[L][i >> 1], i);
        for (int i = 0; i < 4; ++i) B[2 * t + (i & 1) + 8 * (i >> 1)][g] = h(all[L][4 + (i >> 1)], i);
        for (int i = 0; i < 4; ++i) std::memcpy(&C[g + 8 * (i >> 1)][2 * t + (i & 1)], &all[L][6 + i], 4);
    }
    const int l = threadIdx.x & 31, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; ++i) {
        const int r = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float x = C[r][col];
        for (int kk = 0; kk < 16; ++kk) x += A[r][kk] * B[kk][col];
        c[i] = x;
    }
}
inline unsigned att_pack_f16(float lo, float hi) {
    return (unsigned)IO<half_t>::st(lo) | ((unsigned)IO<half_t>::st(hi) << 16);
}
