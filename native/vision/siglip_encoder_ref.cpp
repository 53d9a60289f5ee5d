// Plain-loop SigLIP encoder and projectors (see siglip_encoder_ref.h).
// Invariant: every matrix is applied as y[o] = b[o] + sum_i W[o][i] x[i] with W's GGUF layout [in, out]
// (ne0 = in, contiguous), so a row of the stored tensor is one output's weights.
#include "vision/siglip_encoder_ref.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul.h"
#include "common/error.h"

namespace spindle {

std::vector<float> tensor_floats(const gguf_tensor& t) {
  const int64_t row = t.ne[0], rows = t.n_elements() / t.ne[0];
  std::vector<float> out(size_t(t.n_elements()));
  const size_t row_bytes = size_t(t.n_bytes / uint64_t(rows));
  for (int64_t r = 0; r < rows; ++r) cpu_dequantize_row(t.type, t.data + size_t(r) * row_bytes, out.data() + r * row, row);
  return out;
}

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

float gelu_quick(float x) { return x / (1.0f + std::exp(-1.702f * x)); }

void layer_norm_rows(std::vector<float>& x, int dim, const float* w, const float* b, float eps) {
  for (size_t r = 0; r < x.size() / size_t(dim); ++r) {
    float* v = x.data() + r * size_t(dim);
    double mean = 0, var = 0;
    for (int i = 0; i < dim; ++i) mean += v[i];
    mean /= dim;
    for (int i = 0; i < dim; ++i) var += (v[i] - mean) * (v[i] - mean);
    var /= dim;
    const float inv = float(1.0 / std::sqrt(var + double(eps)));
    for (int i = 0; i < dim; ++i) {
      float y = float(v[i] - mean) * inv;
      if (w) y *= w[i];
      if (b) y += b[i];
      v[i] = y;
    }
  }
}

namespace {

// Per-axis antialiased bilinear weights from `in` samples to `out` (ggml_compute_forward_upscale_f32).
struct axis_weights {
  std::vector<int> lo, hi;
  std::vector<std::vector<float>> w;  // [out][hi - lo], unnormalized
};

axis_weights bilinear_axis(int in, int out) {
  axis_weights a;
  const float sf = float(out) / float(in);
  const float support = std::max(1.0f, 1.0f / sf);
  const float invscale = 1.0f / support;
  for (int i = 0; i < out; ++i) {
    const float center = (float(i) + 0.5f) / sf;
    const int lo = std::max(int(int64_t(center - support + 0.5f)), 0);
    const int hi = std::min(int(int64_t(center + support + 0.5f)), in);
    std::vector<float> w;
    for (int j = lo; j < hi; ++j) w.push_back(std::max(0.0f, 1.0f - std::abs((float(j) - center + 0.5f) * invscale)));
    a.lo.push_back(lo);
    a.hi.push_back(hi);
    a.w.push_back(std::move(w));
  }
  return a;
}

// y[r][o] = b[o] + sum_i W[o][i] x[r][i], W stored [out][in].
std::vector<float> linear(const std::vector<float>& x, int in, const std::vector<float>& W, const gguf_tensor* bias, int out) {
  const size_t rows = x.size() / size_t(in);
  std::vector<float> b = bias ? tensor_floats(*bias) : std::vector<float>(size_t(out), 0.0f);
  std::vector<float> y(rows * size_t(out));
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * size_t(in);
    for (int o = 0; o < out; ++o) {
      const float* wo = W.data() + size_t(o) * size_t(in);
      double acc = 0;
      for (int i = 0; i < in; ++i) acc += double(wo[i]) * xr[i];
      y[r * size_t(out) + size_t(o)] = float(acc) + b[size_t(o)];
    }
  }
  return y;
}

std::vector<float> linear(const std::vector<float>& x, const gguf_tensor& w, const gguf_tensor* bias) {
  return linear(x, int(w.ne[0]), tensor_floats(w), bias, int(w.ne[1]));
}

void norm(std::vector<float>& x, int dim, const gguf_tensor* w, const gguf_tensor* b, float eps) {
  std::vector<float> wf = w ? tensor_floats(*w) : std::vector<float>(), bf = b ? tensor_floats(*b) : std::vector<float>();
  layer_norm_rows(x, dim, w ? wf.data() : nullptr, b ? bf.data() : nullptr, eps);
}

}  // namespace

std::vector<float> resize_pos_embd(const std::vector<float>& pos, int grid, int gw, int gh, int dim) {
  if (gw == grid && gh == grid) return pos;
  const axis_weights ax = bilinear_axis(grid, gw), ay = bilinear_axis(grid, gh);
  std::vector<float> out(size_t(gw) * size_t(gh) * size_t(dim), 0.0f);
  for (int y = 0; y < gh; ++y) {
    for (int x = 0; x < gw; ++x) {
      float* o = out.data() + (size_t(y) * size_t(gw) + size_t(x)) * size_t(dim);
      float total = 0;
      for (int j = ay.lo[size_t(y)]; j < ay.hi[size_t(y)]; ++j) {
        const float wy = ay.w[size_t(y)][size_t(j - ay.lo[size_t(y)])];
        if (wy <= 0) continue;
        for (int i = ax.lo[size_t(x)]; i < ax.hi[size_t(x)]; ++i) {
          const float wx = ax.w[size_t(x)][size_t(i - ax.lo[size_t(x)])];
          if (wx <= 0) continue;
          const float w = wx * wy;
          total += w;
          const float* p = pos.data() + (size_t(j) * size_t(grid) + size_t(i)) * size_t(dim);
          for (int d = 0; d < dim; ++d) o[d] += w * p[d];
        }
      }
      for (int d = 0; d < dim; ++d) o[d] /= total;
    }
  }
  return out;
}

std::vector<float> pixel_unshuffle(const std::vector<float>& x, int gw, int gh, int dim, int s) {
  const int ow = gw / s, oh = gh / s, dm = dim * s * s;
  std::vector<float> out(size_t(ow) * size_t(oh) * size_t(dm));
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox)
      for (int dy = 0; dy < s; ++dy)
        for (int dx = 0; dx < s; ++dx) {
          const float* src = x.data() + (size_t(oy * s + dy) * size_t(gw) + size_t(ox * s + dx)) * size_t(dim);
          float* dst = out.data() + (size_t(oy) * size_t(ow) + size_t(ox)) * size_t(dm) + size_t(dim) * size_t(dx + s * dy);
          std::copy(src, src + dim, dst);
        }
  return out;
}

std::vector<float> avg_pool(const std::vector<float>& x, int gw, int gh, int dim, int s) {
  const int ow = gw / s, oh = gh / s;
  std::vector<float> out(size_t(ow) * size_t(oh) * size_t(dim));
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox)
      for (int d = 0; d < dim; ++d) {
        float sum = 0;  // float, over ky then kx, then divided: ggml's pool_2d
        for (int dy = 0; dy < s; ++dy)
          for (int dx = 0; dx < s; ++dx) sum += x[(size_t(oy * s + dy) * size_t(gw) + size_t(ox * s + dx)) * size_t(dim) + size_t(d)];
        out[(size_t(oy) * size_t(ow) + size_t(ox)) * size_t(dim) + size_t(d)] = sum / float(s * s);
      }
  return out;
}

void rms_norm_rows(std::vector<float>& x, int dim, const float* w, float eps) {
  for (size_t r = 0; r < x.size() / size_t(dim); ++r) {
    float* v = x.data() + r * size_t(dim);
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += double(v[i]) * v[i];
    const float inv = float(1.0 / std::sqrt(ss / dim + double(eps)));
    for (int i = 0; i < dim; ++i) v[i] = v[i] * inv * w[i];
  }
}

std::vector<float> siglip_encode_reference(const mmproj_model& m, const std::vector<float>& pixels, int width, int height) {
  const mmproj_hparams& hp = m.hp;
  const int P = int(hp.patch_size), S = int(hp.scale_factor), D = int(hp.n_embd);
  if (width <= 0 || height <= 0 || width % (P * S) || height % (P * S)) {
    throw error("image entry " + std::to_string(width) + "x" + std::to_string(height) + " is not a multiple of " +
                std::to_string(P * S) + " pixels per side");
  }
  if (pixels.size() != size_t(3) * size_t(width) * size_t(height)) throw error("image entry: pixel count does not match its size");
  const int gw = width / P, gh = height / P, n = gw * gh;

  // Patch embedding: weight row k = kx + P*ky + P*P*c of output o.
  std::vector<float> patches(size_t(n) * size_t(P * P * 3));
  for (int py = 0; py < gh; ++py)
    for (int px = 0; px < gw; ++px)
      for (int c = 0; c < 3; ++c)
        for (int ky = 0; ky < P; ++ky)
          for (int kx = 0; kx < P; ++kx)
            patches[size_t(py * gw + px) * size_t(P * P * 3) + size_t(kx + P * ky + P * P * c)] =
                pixels[(size_t(c) * size_t(height) + size_t(py * P + ky)) * size_t(width) + size_t(px * P + kx)];
  std::vector<float> x = linear(patches, P * P * 3, tensor_floats(*m.patch_embd), m.patch_embd_b, D);
  const std::vector<float> pos = resize_pos_embd(tensor_floats(*m.pos_embd), int(hp.pos_grid), gw, gh, D);
  for (size_t i = 0; i < x.size(); ++i) x[i] += pos[i];

  const int H = int(hp.n_head), dh = D / H;
  const float scale = 1.0f / std::sqrt(float(dh));
  for (const mmproj_layer& L : m.layers) {
    std::vector<float> h = x;
    norm(h, D, L.ln1, L.ln1_b, hp.eps);
    const std::vector<float> q = linear(h, *L.q, L.q_b), k = linear(h, *L.k, L.k_b), v = linear(h, *L.v, L.v_b);
    std::vector<float> att(size_t(n) * size_t(D), 0.0f);
    std::vector<float> s(static_cast<size_t>(n));
    for (int hd = 0; hd < H; ++hd) {
      for (int i = 0; i < n; ++i) {
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < dh; ++d) dot += double(q[size_t(i) * size_t(D) + size_t(hd * dh + d)]) * k[size_t(j) * size_t(D) + size_t(hd * dh + d)];
          s[size_t(j)] = float(dot) * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (int j = 0; j < n; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
        for (int j = 0; j < n; ++j) {
          const float p = float(s[size_t(j)] / sum);
          for (int d = 0; d < dh; ++d) att[size_t(i) * size_t(D) + size_t(hd * dh + d)] += p * v[size_t(j) * size_t(D) + size_t(hd * dh + d)];
        }
      }
    }
    const std::vector<float> a = linear(att, *L.out, L.out_b);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    h = x;
    norm(h, D, L.ln2, L.ln2_b, hp.eps);
    std::vector<float> f = linear(h, *L.up, L.up_b);
    for (float& e : f) e = hp.use_gelu ? gelu_tanh(e) : gelu_quick(e);
    const std::vector<float> dn = linear(f, *L.down, L.down_b);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  if (m.post_ln) norm(x, D, m.post_ln, m.post_ln_b, hp.eps);

  if (hp.gemma3()) {  // pool, RMSNorm, then y[o] = sum_i x[i] P[i][o]: the stored [E, D] is input-major
    std::vector<float> y = avg_pool(x, gw, gh, D, S);
    const std::vector<float> w = tensor_floats(*m.soft_emb_norm);
    rms_norm_rows(y, D, w.data(), hp.eps);
    const std::vector<float> proj = tensor_floats(*m.input_proj);  // [D][E]
    const int E = int(hp.n_embd_out), rows = int(y.size() / size_t(D));
    std::vector<float> out(size_t(rows) * size_t(E));
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < E; ++o) {
        double acc = 0;
        for (int i = 0; i < D; ++i) acc += double(y[size_t(r) * size_t(D) + size_t(i)]) * proj[size_t(i) * size_t(E) + size_t(o)];
        out[size_t(r) * size_t(E) + size_t(o)] = float(acc);
      }
    return out;
  }
  std::vector<float> y = pixel_unshuffle(x, gw, gh, D, S);
  const int Dm = D * S * S;
  if (m.proj_norm) norm(y, Dm, m.proj_norm, m.proj_norm_b, 1e-5f);  // eps fixed at 1e-5, as llama.cpp
  std::vector<float> z = linear(y, *m.proj1, m.proj1_b);
  for (float& e : z) e = gelu_tanh(e);  // the projector always uses GELU
  return linear(z, *m.proj2, m.proj2_b);
}

}  // namespace spindle
