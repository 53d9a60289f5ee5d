// CPU backend (see cpu_backend.h). Invariant: work is split by whole rows / (query, head) items only; nothing
// a worker runs can throw (arguments are checked before pool.run).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/lora_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "backend/cpu/attention_bidir.h"
#include "backend/cpu/attention_paged.h"
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

namespace {

int resolve_threads(int n_threads) {
  if (n_threads > 0) return n_threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : (int)hw;
}

// Elementwise ops below this many elements run on the calling thread only (same result, less overhead).
constexpr int64_t k_min_parallel_elements = 1 << 14;

// Calls fn(ith, begin, end) over [0, n) split into contiguous ranges, on the pool when n is large enough.
template <typename F>
void parallel_range_ith(thread_pool& pool, int64_t n, int64_t min_parallel, F&& fn) {
  if (n < min_parallel || pool.size() == 1) {
    fn(0, (int64_t)0, n);
    return;
  }
  pool.run([&](int ith, int nth) {
    int64_t b, e;
    thread_pool::split(n, ith, nth, &b, &e);
    if (b < e) fn(ith, b, e);
  });
}

template <typename F>
void parallel_range(thread_pool& pool, int64_t n, int64_t min_parallel, F&& fn) {
  parallel_range_ith(pool, n, min_parallel, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

// Tells the kernel that the file rows a packed copy replaces are rarely read from now on (get_rows of a
// tied embedding still reads a few), so under memory pressure their pages go first. Only a hint: the
// contents never change, whatever memory the weight lives in.
void hint_cold(const void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_COLD)
  const uintptr_t page = 4096, b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + bytes) & ~(page - 1);
  if (e > b) (void)madvise((void*)b, e - b, MADV_COLD);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace

std::unique_ptr<backend> make_cpu_backend(int n_threads) { return std::make_unique<cpu_backend>(n_threads); }

cpu_backend::cpu_backend(int n_threads)
    : pool_(resolve_threads(n_threads)), avx2_((int)cpu_active_level() >= (int)cpu_level::avx2) {}

bool cpu_backend::supports_type(ggml_type type) const { return cpu_supports_type(type); }

float* cpu_backend::alloc_f32(int64_t n) {
  if (n < 0) throw error("cpu backend: negative allocation size");
  const uint64_t bytes = checked_mul((uint64_t)n, sizeof(float), "cpu backend allocation");
  float* p = new (std::nothrow) float[n == 0 ? 1 : n]();
  if (!p) throw error("cpu backend: out of memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void cpu_backend::free_f32(float* p) { delete[] p; }

float* cpu_backend::scratch(int64_t n) {
  if ((int64_t)scratch_.size() < n) scratch_.resize((size_t)n);
  return scratch_.data();
}

void cpu_backend::upload(float* dst, const float* src, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void cpu_backend::download(float* dst, const float* src, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void cpu_backend::copy(float* dst, const float* src, int64_t n) { std::memmove(dst, src, n * sizeof(float)); }

backend_weight cpu_backend::upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) {
  if (!cpu_supports_type(type)) {
    const ggml_type_traits* info = ggml_type_info((uint32_t)type);
    throw error(std::string("cpu backend: unsupported weight type ") + (info ? info->name : "?"));
  }
  backend_weight w;
  w.type = type;
  w.data = host_data;
  w.n_in = n_in;
  w.n_out = n_out;
  return w;
}

void cpu_backend::release_weight(backend_weight& w) {
  {  // copies made from its bytes go with it (a later mapping may reuse the address)
    std::lock_guard<std::mutex> lock(packed_mutex_);
    packed_.erase(w.data);
    lora_bt_.erase(w.data);
  }
  w = backend_weight{};
}

void cpu_backend::get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.n_out) {
      throw error("get_rows: row id " + std::to_string(ids[i]) + " out of range [0, " +
                  std::to_string(table.n_out) + ")");
    }
  }
  const uint64_t row_bytes = ggml_row_size(table.type, (uint64_t)table.n_in);
  const uint8_t* base = static_cast<const uint8_t*>(table.data);
  parallel_range(pool_, n, 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      cpu_dequantize_row(table.type, base + (uint64_t)ids[i] * row_bytes, out + i * table.n_in, table.n_in);
    }
  });
}

void cpu_backend::matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) {
  cpu_matmul(pool_, w.type, w.data, w.n_out, w.n_in, x, n_rows, y, packed_for(w));
}

const packed_weight* cpu_backend::packed_for(const backend_weight& w) {
  if (w.data == nullptr || !cpu_packed_supported(cpu_active_level(), w.type)) return nullptr;
  std::lock_guard<std::mutex> lock(packed_mutex_);
  auto it = packed_.find(w.data);
  if (it == packed_.end()) {
    it = packed_.emplace(w.data, cpu_pack_weight(cpu_active_level(), pool_, w.type, w.data, w.n_out, w.n_in)).first;
    if (it->second) hint_cold(w.data, it->second->bytes());
  }
  const packed_weight* p = it->second.get();
  // the same bytes uploaded again under another shape: use the rows directly
  if (p != nullptr && (p->type() != w.type || p->n_in() != w.n_in || p->n_rows() != (p->layout() == pack_layout::x8
                                                                    ? w.n_out / k_pack_rows * k_pack_rows
                                                                    : w.n_out))) {
    return nullptr;
  }
  return p;
}

const std::vector<float>* cpu_backend::lora_bt_for(const backend_weight& b) {
  if (b.data == nullptr || !cpu_lora_kernel_type(b.type)) return nullptr;
  std::lock_guard<std::mutex> lock(packed_mutex_);
  auto it = lora_bt_.find(b.data);
  if (it == lora_bt_.end()) it = lora_bt_.emplace(b.data, cpu_lora_transpose(b.type, b.data, b.n_out, b.n_in)).first;
  return &it->second;
}

bool cpu_backend::lora_add_in_place(const backend_weight& b) const { return cpu_lora_kernel_type(b.type); }

void cpu_backend::lora_add(const backend_weight& a, const backend_weight& b, float scale, const float* x, int64_t n_rows,
                           float* y, float* low, float* delta) {
  const std::vector<float>* bt = lora_bt_for(b);
  if (bt == nullptr) return backend::lora_add(a, b, scale, x, n_rows, y, low, delta);
  matmul(a, x, n_rows, low);  // [n_rows, r]
  const int64_t r = b.n_in, n_out = b.n_out;
  for (int64_t t = 0; t < n_rows; ++t) cpu_lora_round_low(b.type, low + t * r, r);
  constexpr int64_t k_chunk = 16 * k_lora_block, k_rows = 16;  // outputs (whole blocks) and rows per task
  const int64_t chunks = (n_out + k_chunk - 1) / k_chunk, row_groups = (n_rows + k_rows - 1) / k_rows;
  parallel_range(pool_, row_groups * chunks, 2, [&](int64_t tb, int64_t te) {
    for (int64_t task = tb; task < te; ++task) {
      const int64_t t0 = task / chunks * k_rows, o0 = task % chunks * k_chunk, nt = std::min(k_rows, n_rows - t0);
      cpu_lora_add_rows(low + t0 * r, nt, r, bt->data(), n_out, o0, std::min(n_out, o0 + k_chunk), scale, y + t0 * n_out);
    }
  });
}

void cpu_backend::add_row_vector(float* x, const float* b, int64_t n_rows, int64_t n) {
  parallel_range(pool_, n_rows, k_min_parallel_elements / (n > 0 ? n : 1) + 1, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) ops_add(x + r * n, b, x + r * n, n);
  });
}

void cpu_backend::add(const float* a, const float* b, float* y, int64_t n) {
  parallel_range(pool_, n, k_min_parallel_elements, [&](int64_t s, int64_t e) { ops_add(a + s, b + s, y + s, e - s); });
}

void cpu_backend::rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  parallel_range(pool_, n_rows, k_min_parallel_elements / (n > 0 ? n : 1) + 1, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) ops_rms_norm_row(x + r * n, w, y + r * n, n, eps);
  });
}

void cpu_backend::layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int64_t n,
                             float eps) {
  parallel_range(pool_, n_rows, k_min_parallel_elements / (n > 0 ? n : 1) + 1, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      if (avx2_) ops_layer_norm_row_avx2(x + r * n, w, b, y + r * n, n, eps);
      else ops_layer_norm_row(x + r * n, w, b, y + r * n, n, eps);
    }
  });
}

void cpu_backend::rope(float* x, int64_t n_rows, int32_t n_head, int32_t head_dim, const int32_t* pos,
                       const rope_params& p) {
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim) {
    throw error("rope: n_rot " + std::to_string(p.n_rot) + " must be even and in (0, head_dim " +
                std::to_string(head_dim) + "]");
  }
  float* caches = scratch((int64_t)pool_.size() * p.n_rot);  // one [n_rot] cache per thread
  parallel_range_ith(pool_, n_rows, 2, [&](int ith, int64_t rb, int64_t re) {
    float* cache = caches + (size_t)ith * p.n_rot;
    for (int64_t r = rb; r < re; ++r) {
      ops_rope_cache(pos[r], p, cache);
      float* row = x + r * (int64_t)n_head * head_dim;
      for (int32_t h = 0; h < n_head; ++h) {
        if (avx2_) ops_rope_head_avx2(row + (int64_t)h * head_dim, cache, p.n_rot, p.neox);
        else ops_rope_head(row + (int64_t)h * head_dim, cache, p.n_rot, p.neox);
      }
    }
  });
}

void cpu_backend::swiglu(const float* gate, const float* up, float* y, int64_t n) {
  // split in groups of 8 elements: the AVX2 kernel's 8-groups then start where a single call's would
  parallel_range(pool_, (n + 7) / 8, k_min_parallel_elements / 8, [&](int64_t gb, int64_t ge) {
    const int64_t s = gb * 8, e = std::min(n, ge * 8);
    if (avx2_) ops_swiglu_avx2(gate + s, up + s, y + s, e - s);
    else ops_swiglu(gate + s, up + s, y + s, e - s);
  });
}

// Each element's bits depend on its value only (the AVX2 kernels run the rest through masked lanes), so any
// split gives the same result; ranges of whole 8-groups keep the vector loads full.
void cpu_backend::gelu(const float* x, float* y, int64_t n) {
  parallel_range(pool_, (n + 7) / 8, k_min_parallel_elements / 8, [&](int64_t gb, int64_t ge) {
    const int64_t s = gb * 8, e = std::min(n, ge * 8);
    if (avx2_) ops_gelu_avx2(x + s, y + s, e - s);
    else ops_gelu_vec(x + s, y + s, e - s);
  });
}

// gelu(gate) a chunk at a time into a stack buffer, then times up: y may alias gate or up. Each element's bits depend
// on its gate and up values only (as for gelu), so any split gives the same result.
void cpu_backend::geglu(const float* gate, const float* up, float* y, int64_t n) {
  parallel_range(pool_, (n + 7) / 8, k_min_parallel_elements / 8, [&](int64_t gb, int64_t ge) {
    constexpr int64_t k_chunk = 256;
    float g[k_chunk];
    for (int64_t s = gb * 8, e = std::min(n, ge * 8); s < e; s += k_chunk) {
      const int64_t m = std::min(k_chunk, e - s);
      if (avx2_) ops_gelu_avx2(gate + s, g, m);
      else ops_gelu_vec(gate + s, g, m);
      for (int64_t i = 0; i < m; ++i) y[s + i] = g[i] * up[s + i];
    }
  });
}

void cpu_backend::gelu_quick(const float* x, float* y, int64_t n) {
  parallel_range(pool_, (n + 7) / 8, k_min_parallel_elements / 8, [&](int64_t gb, int64_t ge) {
    const int64_t s = gb * 8, e = std::min(n, ge * 8);
    if (avx2_) ops_gelu_quick_avx2(x + s, y + s, e - s);
    else ops_gelu_quick_vec(x + s, y + s, e - s);
  });
}

void cpu_backend::softmax(float* x, int64_t n_rows, int64_t n, float scale) {
  parallel_range(pool_, n_rows, k_min_parallel_elements / (n > 0 ? n : 1) + 1, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      if (avx2_) ops_softmax_row_avx2(x + r * n, n, scale);
      else ops_softmax_row(x + r * n, n, scale);
    }
  });
}

void cpu_backend::attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                            float* out) {
  attention_rows(p, q, k_cache, nullptr, v_cache, nullptr, out);
}

void cpu_backend::attention_rows(const attention_params& p, const float* q, const void* k_base,
                                 const void* const* k_table, const void* v_base, const void* const* v_table,
                                 float* out) {
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 || p.n_tokens < 0 || p.n_past < 0) {
    throw error("attention: invalid head counts or token range");
  }
  if (p.window < 0) throw error("attention: a sliding window must be >= 0, got " + std::to_string(p.window));
  attention_kv_blocks_check(p, "attention");
  if (p.window > 0 && p.n_past + p.n_tokens <= p.window) {  // every query's window starts at 0: no window (same bits,
    attention_params all = p;                               // and the tiles may hold many tokens again)
    all.window = 0;
    attention_rows(all, q, k_base, k_table, v_base, v_table, out);
    return;
  }
  // The AVX2 tiles take causal calls (any store type, any window) and non-causal ones over f32 K / V without a
  // window (the bidirectional tiles: a ViT encoder's); the other non-causal calls (typed stores, windows: gemma3's
  // image spans) go item by item below, through the per-item AVX2 kernel where the tiles would use it.
  if (avx2_ && (p.causal || (p.kv == kv_type::f32 && p.window == 0))) {
    attention_tiles(p, q, k_base, k_table, v_base, v_table, out);
    return;
  }
  const int64_t n_kv_max = p.n_past + p.n_tokens;
  const int64_t n_items = p.n_tokens * p.n_head;
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t per_thread = ops_attention_scratch(n_kv_max, p.head_dim_v);
  float* scratch_all = scratch((int64_t)pool_.size() * per_thread);  // one scratch area per thread
  const auto run_item = [&](int64_t item, float* scores) {
    const int64_t t = item / p.n_head;
    const int32_t h = (int32_t)(item % p.n_head);
    const int32_t hkv = h / group;
    const float* qh = q + (t * p.n_head + h) * (int64_t)p.head_dim_k;
    float* oh = out + (t * p.n_head + h) * (int64_t)p.head_dim_v;
    const int64_t k_off = (int64_t)hkv * p.head_dim_k, v_off = (int64_t)hkv * p.head_dim_v;
    // keys [first, n_kv): up to the query's own position (causal) or to the call's last one (not), from its
    // window's start (0 without a window)
    const int64_t pos = p.n_past + t;
    const int64_t n_kv = p.causal ? pos + 1 : n_kv_max;
    const int64_t first = attention_first_pos(p, pos);
    const kv_rows k = kv_rows{k_base, p.k_row_stride, k_table, k_off, p.kv}.from(first);
    const kv_rows v = kv_rows{v_base, p.v_row_stride, v_table, v_off, p.kv}.from(first);
    if (avx2_) ops_attention_head_kv_avx2(qh, k, v, n_kv - first, p.head_dim_k, p.head_dim_v, p.scale, scores, oh);
    else ops_attention_head_kv(qh, k, v, n_kv - first, p.head_dim_k, p.head_dim_v, p.scale, scores, oh);
  };
  // Items go out in small chunks from a shared counter: later queries attend to more positions (causal), so
  // equal contiguous ranges would leave the last thread most of the work. Which thread runs an item never
  // changes its bits.
  std::atomic<int64_t> next{0};
  const int64_t chunk = std::max<int64_t>(1, n_items / (16 * (int64_t)pool_.size()));
  const auto work = [&](int ith, int) {
    float* scores = scratch_all + (size_t)ith * per_thread;
    for (int64_t ib; (ib = next.fetch_add(chunk, std::memory_order_relaxed)) < n_items;)
      for (int64_t item = ib; item < std::min(n_items, ib + chunk); ++item) run_item(item, scores);
  };
  if (n_items < 2 || pool_.size() == 1) work(0, 1);
  else pool_.run(work);
}

// The AVX2 path: tiles of (consecutive tokens x query heads of one KV head) so K / V rows are fetched once per
// tile; tiles go out one at a time from a shared counter, costliest (last tokens) first, so the threads finish
// together. Causal tiles' outputs are bitwise the per-item kernel's, non-causal ones (f32 K / V without a window:
// attention_rows sends no other) follow attention_bidir.h's fixed order, whichever thread runs them.
void cpu_backend::attention_tiles(const attention_params& p, const float* q, const void* k_base,
                                  const void* const* k_table, const void* v_base, const void* const* v_table,
                                  float* out) {
  if (p.n_tokens == 0) return;
  const attention_tiling tl = attention_make_tiling(p);
  const int64_t n_tiles = tl.n_tiles();
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t per_thread = p.causal ? attention_tile_scratch(p, tl) : attention_bidir_scratch(p, tl);
  float* scratch_all = scratch((int64_t)pool_.size() * per_thread);  // one scratch area per thread
  std::atomic<int64_t> next{0};
  const auto work = [&](int ith, int) {
    float* ts = scratch_all + (size_t)ith * per_thread;
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_tiles;) {
      const attention_tile tile = tl.tile(p, i);
      const int32_t hkv = tile.h0 / group;
      const int64_t k_off = (int64_t)hkv * p.head_dim_k, v_off = (int64_t)hkv * p.head_dim_v;
      const kv_rows k{k_base, p.k_row_stride, k_table, k_off, p.kv};
      const kv_rows v{v_base, p.v_row_stride, v_table, v_off, p.kv};
      if (!p.causal) {
        attention_bidir_tile_avx2(p, tile, q, k, v, ts, out);
      } else if (p.window > 0) {
        // a windowed tile holds one token (attention_make_tiling): its keys [first, P] as a causal call whose cache
        // starts at `first` (n_past shifted alike), so the tile kernel's bits are the per-item kernel's over them
        const int64_t first = attention_first_pos(p, p.n_past + tile.t0);
        attention_params shifted = p;
        shifted.n_past = p.n_past - first;
        attention_tile_avx2(shifted, tile, q, k.from(first), v.from(first), ts, out);
      } else {
        attention_tile_avx2(p, tile, q, k, v, ts, out);
      }
    }
  };
  if (n_tiles < 2 || pool_.size() == 1) work(0, 1);
  else pool_.run(work);
}

}  // namespace spindle
