// cpu_matmul through panels (panel.h): the activations of a token chunk go into panel-order tiles once; then
// the threads take work items (one panel of weight rows x a run of token tiles) from a shared counter, pack the
// item's panel from the weight rows into a per-thread buffer (unless they packed it for their previous item)
// and run the panel kernel over its token tiles. Nothing is kept between calls: no copy of the weights.
// Invariant (batch invariance): every y[t, o] is one panel-kernel output, which has the bits of the level's
// tile kernel for (o, t) (panel.h), so neither the chunking, the items, the thread count nor n_tokens change it.
#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot.h"
#include "common/checked_math.h"

namespace spindle {

namespace {

// Activation tiles of a chunk stay within ~16 MiB (the threads stream them once per panel, from L3); every chunk
// packs every panel again.
constexpr size_t k_chunk_act_bytes = (size_t)16 << 20;

struct panel_plan {
  panel_kernel k;
  const uint8_t* w;      // [n_out, w_row] bytes
  size_t w_row;          // bytes per weight row
  int64_t n_out, n_in;
  int64_t tile_floats;   // floats per activation tile (n_slots * max_tokens)
  size_t panel_bytes;    // bytes per packed panel
  int64_t n_panels;
};

// Panel p packed into this thread's buffer (kept when the previous item of this thread had the same panel).
const uint8_t* packed_panel(const panel_plan& p, int64_t panel, uint64_t call) {
  thread_local std::vector<uint8_t> buf;
  thread_local int64_t buf_panel = -1;
  thread_local uint64_t buf_call = 0;
  if (buf.size() < p.panel_bytes) {
    buf.resize(p.panel_bytes);
    buf_panel = -1;
  }
  if (buf_panel != panel || buf_call != call) {
    const int64_t r0 = panel * p.k.shape.rows;
    const int nr = (int)std::min<int64_t>(p.k.shape.rows, p.n_out - r0);
    p.k.pack(p.n_in, p.w + (size_t)r0 * p.w_row, p.w_row, nr, buf.data());
    buf_panel = panel;
    buf_call = call;
  }
  return buf.data();
}

uint64_t next_call_id() {
  static std::atomic<uint64_t> id{0};
  return ++id;
}

// Tokens [t0, t0 + n_tok): acts holds their tiles; items are (panel, group of tiles), panel-major.
void run_chunk(thread_pool& pool, const panel_plan& p, const float* acts, int64_t t0, int64_t n_tok, float* y) {
  const int mt = p.k.max_tokens;
  const int64_t n_tiles = (n_tok + mt - 1) / mt;
  // Enough items for the threads to share out, each panel packed for as many tiles as that allows.
  const int64_t want_items = 4 * (int64_t)pool.size();
  const int64_t groups =
      std::min<int64_t>(n_tiles, std::max<int64_t>(1, (want_items + p.n_panels - 1) / p.n_panels));
  const int64_t tiles_per_group = (n_tiles + groups - 1) / groups;
  const int64_t n_items = p.n_panels * groups;
  const uint64_t call = next_call_id();
  std::atomic<int64_t> next{0};
  auto work = [&](int, int) {
    for (int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      const int64_t panel = item / groups, g = item % groups;
      const int64_t r0 = panel * p.k.shape.rows;
      const int nr = (int)std::min<int64_t>(p.k.shape.rows, p.n_out - r0);
      const uint8_t* wp = packed_panel(p, panel, call);
      for (int64_t tile = g * tiles_per_group; tile < std::min(n_tiles, (g + 1) * tiles_per_group); ++tile) {
        const int64_t t = tile * mt;
        const int nt = (int)std::min<int64_t>(mt, n_tok - t);
        p.k.fn(p.n_in, wp, acts + tile * p.tile_floats, nt, y + (t0 + t) * p.n_out + r0, p.n_out, nr);
      }
    }
  };
  if (pool.size() == 1 || n_items == 1) work(0, 1);
  else pool.run(work);
}

}  // namespace

void cpu_matmul_panels(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                       int64_t n_in, const float* x, int64_t n_tokens, float* y) {
  panel_plan p;
  p.k = cpu_panel_kernel(level, wtype);
  p.w = (const uint8_t*)W;
  p.w_row = cpu_row_bytes(wtype, n_in);
  p.n_out = n_out;
  p.n_in = n_in;
  const int64_t n_slots = p.k.shape.n_slots(n_in), mt = p.k.max_tokens;
  p.tile_floats = (int64_t)checked_mul((uint64_t)n_slots, (uint64_t)mt, "panel activations");
  p.panel_bytes = (size_t)checked_mul((uint64_t)p.k.shape.n_elements(n_in), p.k.element_bytes, "panel");
  p.n_panels = (n_out + p.k.shape.rows - 1) / p.k.shape.rows;
  const size_t tile_bytes = (size_t)p.tile_floats * sizeof(float);
  const int64_t n_tiles = (n_tokens + mt - 1) / mt;
  const int64_t max_tiles = std::max<int64_t>(1, (int64_t)(k_chunk_act_bytes / tile_bytes));
  const int64_t n_chunks = (n_tiles + max_tiles - 1) / max_tiles;  // chunks of equal size (+-1 tile)
  const int64_t chunk_tiles = (n_tiles + n_chunks - 1) / n_chunks;
  thread_local std::vector<float> acts;
  const size_t act_floats = (size_t)std::min(n_tiles, chunk_tiles) * (size_t)p.tile_floats;
  if (acts.size() < act_floats) acts.resize(act_floats);
  float* act_buf = acts.data();  // (a worker naming `acts` would get its own thread's vector)
  for (int64_t c0 = 0; c0 < n_tiles; c0 += chunk_tiles) {
    const int64_t c1 = std::min(n_tiles, c0 + chunk_tiles);
    const int64_t t0 = c0 * mt, n_tok = std::min(n_tokens, c1 * mt) - t0;
    auto fill = [&](int ith, int nth) {
      thread_local std::vector<float> tmp;
      if ((int64_t)tmp.size() < n_in) tmp.resize((size_t)n_in);
      int64_t b, e;
      thread_pool::split(c1 - c0, ith, nth, &b, &e);
      for (int64_t tile = b; tile < e; ++tile) {
        const int64_t t = t0 + tile * mt;
        const int nt = (int)std::min<int64_t>(mt, n_tokens - t);
        pack_panel_activations(p.k, x + t * n_in, n_in, n_in, nt, act_buf + tile * p.tile_floats, tmp.data());
      }
    };
    if (pool.size() > 1 && c1 - c0 > 1) pool.run(fill);
    else fill(0, 1);
    run_chunk(pool, p, act_buf, t0, n_tok, y);
  }
}

}  // namespace spindle
