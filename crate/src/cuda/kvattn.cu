// KV-cache attention on the (n_layers, B, T, H_kv, D) store: append new K/V at each token's
// (row, position), then causal or windowed attention of the new tokens over their own rows.
//
// One block attends a tile: up to MAX_QUERIES query vectors (consecutive tokens of one row times
// the query heads of one KV group) against one KV head, so each cached key and value is read
// from memory once for the whole tile however large the GQA group. Keys stream through shared
// memory KEYS_PER_STEP at a time; each warp owns whole queries, lane j scores key j, and the
// softmax is online (running max and sum), so a query of any length costs one pass.
//
// Split-KV (flash-decoding): with few tiles (decode at small batch) the key range of each tile
// is cut into gridDim.z pieces that run on separate blocks; each writes an unnormalised partial
// output with its max and sum, and kvattn_combine merges them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define MAX_QUERIES 16
#define KEYS_PER_STEP 32
#define WARPS 4
#define QUERIES_PER_WARP (MAX_QUERIES / WARPS)

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}
__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Copies `n_keys` rows of D elements (row stride `stride` elements in global memory) into shared
// memory as floats, 16-byte loads, zeros past n_keys so masked lanes read finite values.
template <typename T, int D, int SROW>
__device__ __forceinline__ void load_keys(float* dst, const T* src, long stride, int n_keys) {
    constexpr int VEC = 16 / sizeof(T);
    constexpr int VECS_PER_ROW = D / VEC;
    for (int i = threadIdx.x; i < KEYS_PER_STEP * VECS_PER_ROW; i += blockDim.x) {
        const int j = i / VECS_PER_ROW, c = (i % VECS_PER_ROW) * VEC;
        float* out = dst + j * SROW + c;
        if (j < n_keys) {
            const uint4 raw = *reinterpret_cast<const uint4*>(src + j * stride + c);
            const T* vals = reinterpret_cast<const T*>(&raw);
#pragma unroll
            for (int e = 0; e < VEC; e++) out[e] = to_f32(vals[e]);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++) out[e] = 0.0f;
        }
    }
}

// Grid: (tiles, H_kv, splits); block: WARPS warps.
// q, out: (N, H, D). k, v: the layer's (B, T, H_kv, D) slab. rows, pos: (N). tiles: 4 per tile.
// part_o: (splits, N, H, D) and part_ml: (splits, N, H, 2), used only when splits > 1.
template <typename T, int D>
__device__ void attend(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ out,
                       float* __restrict__ part_o, float* __restrict__ part_ml, const uint32_t* __restrict__ rows,
                       const uint32_t* __restrict__ pos, const uint32_t* __restrict__ tiles, int n_tokens, int n_heads,
                       int n_kv_heads, int capacity, int window, float scale_log2) {
    constexpr int SROW = D + 1;  // padding: lanes reading key j at the same d hit distinct banks
    constexpr int PER_LANE = D / 32;
    __shared__ float s_k[KEYS_PER_STEP * SROW];
    __shared__ float s_v[KEYS_PER_STEP * D];
    __shared__ float s_q[MAX_QUERIES * D];

    const uint32_t* tile = tiles + 4 * blockIdx.x;
    const int first = tile[0], n_tok = tile[1], g0 = tile[2], n_g = tile[3];
    const int n_q = n_tok * n_g;
    const int kv_head = blockIdx.y, group = n_heads / n_kv_heads;
    const int row = rows[first];
    const int split = blockIdx.z, splits = gridDim.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    for (int i = threadIdx.x; i < n_q * D; i += blockDim.x) {
        const int m = i / D, tok = first + m / n_g, head = kv_head * group + g0 + m % n_g;
        s_q[i] = to_f32(q[((long)tok * n_heads + head) * D + i % D]);
    }

    // Keys the tile needs: from the first token's window start to the last token's position.
    const int first_pos = pos[first], last_pos = pos[first + n_tok - 1];
    const int tile_lo = window >= 0 ? max(0, first_pos - window) : 0;
    const int tile_hi = last_pos + 1;
    const int per_split = ((tile_hi - tile_lo + splits - 1) / splits + KEYS_PER_STEP - 1) / KEYS_PER_STEP * KEYS_PER_STEP;
    const int lo = tile_lo + split * per_split;
    const int hi = min(tile_hi, lo + per_split);

    float m_run[QUERIES_PER_WARP], l_run[QUERIES_PER_WARP], acc[QUERIES_PER_WARP][PER_LANE];
    int q_lo[QUERIES_PER_WARP], q_hi[QUERIES_PER_WARP];
#pragma unroll
    for (int i = 0; i < QUERIES_PER_WARP; i++) {
        const int m = warp + i * WARPS;
        const int p = m < n_q ? (int)pos[first + m / n_g] : -1;
        q_hi[i] = p + 1;
        q_lo[i] = window >= 0 ? max(0, p - window) : 0;
        m_run[i] = -INFINITY;
        l_run[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < PER_LANE; e++) acc[i][e] = 0.0f;
    }

    const long stride = (long)n_kv_heads * D;
    const long row_base = (long)row * capacity * stride + (long)kv_head * D;
    for (int c0 = lo; c0 < hi; c0 += KEYS_PER_STEP) {
        const int n_keys = min(KEYS_PER_STEP, hi - c0);
        __syncthreads();  // the previous step's keys (and, first time, s_q) are done with
        load_keys<T, D, SROW>(s_k, k + row_base + c0 * stride, stride, n_keys);
        load_keys<T, D, D>(s_v, v + row_base + c0 * stride, stride, n_keys);
        __syncthreads();
        const int key = c0 + lane;
#pragma unroll
        for (int i = 0; i < QUERIES_PER_WARP; i++) {
            const int m = warp + i * WARPS;
            if (m >= n_q) break;
            float s = -INFINITY;
            if (key >= q_lo[i] && key < q_hi[i] && lane < n_keys) {
                const float* qv = s_q + m * D;
                const float* kv = s_k + lane * SROW;
                float dot = 0.0f;
#pragma unroll 16
                for (int e = 0; e < D; e++) dot = fmaf(qv[e], kv[e], dot);
                s = dot * scale_log2;
            }
            const float m_new = fmaxf(m_run[i], warp_max(s));
            if (m_new == -INFINITY) continue;  // nothing visible yet for this query
            const float p = exp2f(s - m_new);
            const float alpha = exp2f(m_run[i] - m_new);
            l_run[i] = l_run[i] * alpha + warp_sum(p);
            m_run[i] = m_new;
#pragma unroll
            for (int e = 0; e < PER_LANE; e++) acc[i][e] *= alpha;
            for (int j = 0; j < n_keys; j++) {
                const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
                for (int e = 0; e < PER_LANE; e++) acc[i][e] = fmaf(pj, s_v[j * D + lane + 32 * e], acc[i][e]);
            }
        }
    }

#pragma unroll
    for (int i = 0; i < QUERIES_PER_WARP; i++) {
        const int m = warp + i * WARPS;
        if (m >= n_q) break;
        const long qi = (long)(first + m / n_g) * n_heads + kv_head * group + g0 + m % n_g;
        if (splits == 1) {
            const float inv = l_run[i] > 0.0f ? 1.0f / l_run[i] : 0.0f;
#pragma unroll
            for (int e = 0; e < PER_LANE; e++) out[qi * D + lane + 32 * e] = from_f32<T>(acc[i][e] * inv);
        } else {
            const long at = (long)split * n_tokens * n_heads + qi;
#pragma unroll
            for (int e = 0; e < PER_LANE; e++) part_o[at * D + lane + 32 * e] = acc[i][e];
            if (lane == 0) {
                part_ml[at * 2] = m_run[i];
                part_ml[at * 2 + 1] = l_run[i];
            }
        }
    }
}

// One warp per (token, head): the splits' partial outputs rescaled to their common max.
template <typename T, int D>
__device__ void combine(const float* __restrict__ part_o, const float* __restrict__ part_ml, T* __restrict__ out,
                        int n_queries, int splits) {
    constexpr int PER_LANE = D / 32;
    const long qi = (long)blockIdx.x * WARPS + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (qi >= n_queries) return;
    float m = -INFINITY;
    for (int s = 0; s < splits; s++) m = fmaxf(m, part_ml[((long)s * n_queries + qi) * 2]);
    float l = 0.0f, acc[PER_LANE];
#pragma unroll
    for (int e = 0; e < PER_LANE; e++) acc[e] = 0.0f;
    for (int s = 0; s < splits; s++) {
        const long at = (long)s * n_queries + qi;
        const float ms = part_ml[at * 2];
        if (ms == -INFINITY) continue;  // a split that saw no visible key
        const float w = exp2f(ms - m);
        l += w * part_ml[at * 2 + 1];
#pragma unroll
        for (int e = 0; e < PER_LANE; e++) acc[e] = fmaf(w, part_o[at * D + lane + 32 * e], acc[e]);
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int e = 0; e < PER_LANE; e++) out[qi * D + lane + 32 * e] = from_f32<T>(acc[e] * inv);
}

// One thread per element: new (N, width) into the slab (B, T, width) at (rows[i], pos[i]).
template <typename T>
__device__ void append(T* __restrict__ slab, const T* __restrict__ src, const uint32_t* __restrict__ rows,
                       const uint32_t* __restrict__ pos, long n_elems, int width, int capacity) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n_elems; i += (long)gridDim.x * blockDim.x) {
        const long tok = i / width;
        slab[((long)rows[tok] * capacity + pos[tok]) * width + i % width] = src[i];
    }
}

#define ATTEND(NAME, T, D)                                                                                             \
    extern "C" __global__ void __launch_bounds__(WARPS * 32)                                                          \
        NAME(const T* q, const T* k, const T* v, T* out, float* part_o, float* part_ml, const uint32_t* rows,          \
             const uint32_t* pos, const uint32_t* tiles, int n_tokens, int n_heads, int n_kv_heads, int capacity,     \
             int window, float scale_log2) {                                                                           \
        attend<T, D>(q, k, v, out, part_o, part_ml, rows, pos, tiles, n_tokens, n_heads, n_kv_heads, capacity, window, \
                     scale_log2);                                                                                      \
    }                                                                                                                  \
    extern "C" __global__ void NAME##_combine(const float* part_o, const float* part_ml, T* out, int n_queries,        \
                                              int splits) {                                                            \
        combine<T, D>(part_o, part_ml, out, n_queries, splits);                                                        \
    }

ATTEND(kvattn_bf16_d64, __nv_bfloat16, 64)
ATTEND(kvattn_bf16_d128, __nv_bfloat16, 128)
ATTEND(kvattn_f16_d64, __half, 64)
ATTEND(kvattn_f16_d128, __half, 128)
ATTEND(kvattn_f32_d64, float, 64)
ATTEND(kvattn_f32_d128, float, 128)

#define APPEND(NAME, T)                                                                                              \
    extern "C" __global__ void NAME(T* slab, const T* src, const uint32_t* rows, const uint32_t* pos, long n_elems, \
                                    int width, int capacity) {                                                       \
        append<T>(slab, src, rows, pos, n_elems, width, capacity);                                                   \
    }

APPEND(kv_append_bf16, __nv_bfloat16)
APPEND(kv_append_f16, __half)
APPEND(kv_append_f32, float)
