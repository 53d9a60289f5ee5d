// Step graphs of the CUDA backend (backend::graph_begin / graph_end): a decode step issues hundreds of small
// kernels whose launch cost, not their work, sets the step time. Between graph_begin(key) and graph_end() the
// backend records instead of launching: each op's host work runs as usual (checks, staging of host arrays), its
// launch is kept as a closure and its kernel, launch shape and argument bytes are appended to a signature.
// Host arrays are staged into the key's own pinned area at fixed offsets (equal arrays of one step share one
// copy). At graph_end, a step whose signature equals the one its key's graph was captured from replays that
// graph: one launch whose first node copies the staged area in. A step of a new shape runs its recorded ops one
// by one and leaves its signature; when it comes again, its ops are captured into a graph (or update the key's
// graph in place) and launched.
// Invariants: a graph is launched only for a step whose launches are, byte for byte, the ones it was captured
// from (so every pointer, shape and scalar is the step's own); the staging area is rewritten only after the
// key's last launch has read it; a step that needs the host mid-way (download, upload, sync, free) plays what
// it recorded op by op at that point and carries on without a graph, with the same kernels and so the same bits.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace spindle {

namespace {

constexpr size_t k_stage_area = size_t(1) << 20;  // a key's first staging area (grows when a step outgrows it)
constexpr size_t k_max_graphs = 16;               // keys kept; the least recently used goes first
constexpr int k_dedup_window = 32;                // earlier arrays of the step compared for a shared copy

std::atomic<uint64_t> g_replayed{0}, g_captured{0}, g_op_by_op{0}, g_first_seen{0};
std::atomic<uint64_t> g_record_ns{0};

uint64_t now_ns() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}  // every backend of the process

}  // namespace

cuda_graph_counts cuda_step_graph_counts() {
  return cuda_graph_counts{g_replayed.load(), g_captured.load(), g_op_by_op.load(), g_first_seen.load(),
                           (double)g_record_ns.load() * 1e-9};
}

void cuda_backend::destroy_graph(step_graph& g) {
  if (g.done) cudaEventSynchronize(g.done);
  if (g.exec) cudaGraphExecDestroy(g.exec);
  if (g.stage_host) cudaFreeHost(g.stage_host);
  if (g.stage_dev) cudaFree(g.stage_dev);
  if (g.done) cudaEventDestroy(g.done);
  g = step_graph();
}

void cuda_backend::graph_begin(uint64_t key) {
  if (!graphs_enabled_ || rec_) return;
  if (graphs_.size() >= k_max_graphs && graphs_.find(key) == graphs_.end()) {
    auto oldest = std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    destroy_graph(oldest->second);
    graphs_.erase(oldest);
  }
  step_graph& g = graphs_[key];
  if (g.disabled) return;
  if (!g.stage_host || g.stage_cap < g.want_cap) {
    const size_t cap = std::max(k_stage_area, g.want_cap);
    destroy_graph(g);
    g.want_cap = cap;
    SPINDLE_CUDA_CHECK(cudaMallocHost((void**)&g.stage_host, cap));
    SPINDLE_CUDA_CHECK(cudaMalloc((void**)&g.stage_dev, cap));
    SPINDLE_CUDA_CHECK(cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming));
    g.stage_cap = cap;
  }
  SPINDLE_CUDA_CHECK(cudaEventSynchronize(g.done));  // the key's last launch has read the staging area
  g.last_use = ++graph_clock_;
  rec_begin_ns_ = now_ns();
  rec_ = &g;
  rec_sig_.clear();
  rec_ops_.clear();
  rec_stages_.clear();
  rec_stage_used_ = 0;
}

void cuda_backend::enqueue(const void* sig, size_t sig_bytes, std::function<void()> op) {
  qx_of_ = nullptr;  // a copy or fill may write the activations the last quantization came from
  if (!recording()) {
    op();
    return;
  }
  if (sig) sig_add(sig, sig_bytes);
  rec_ops_.push_back(std::move(op));
}

const void* cuda_backend::stage_recorded(const void* host, size_t bytes) {
  step_graph& g = *rec_;
  int looked = 0;
  for (auto it = rec_stages_.rbegin(); it != rec_stages_.rend() && looked < k_dedup_window; ++it, ++looked) {
    if (it->second == bytes && std::memcmp(g.stage_host + it->first, host, bytes) == 0) return g.stage_dev + it->first;
  }
  const size_t at = (rec_stage_used_ + 15) & ~size_t(15);
  if (at + bytes > g.stage_cap) {  // outgrown: this step runs op by op, the key's next step gets a larger area
    g.want_cap = 2 * (at + bytes);
    play_recorded_eagerly();
    return stage(host, bytes);
  }
  std::memcpy(g.stage_host + at, host, bytes);
  rec_stages_.emplace_back(at, bytes);
  rec_stage_used_ = at + bytes;
  return g.stage_dev + at;
}

// The staged host arrays in, then the recorded ops in order (launched now, or captured during a capture).
void cuda_backend::run_recorded(step_graph& g, std::vector<std::function<void()>>& ops) {
  if (rec_stage_used_) {
    SPINDLE_CUDA_CHECK(
        cudaMemcpyAsync(g.stage_dev, g.stage_host, rec_stage_used_, cudaMemcpyHostToDevice, stream_));
  }
  for (auto& op : ops) op();
}

void cuda_backend::play_recorded_eagerly() {
  if (!rec_) return;
  step_graph& g = *rec_;
  rec_ = nullptr;
  std::vector<std::function<void()>> ops;
  ops.swap(rec_ops_);
  run_recorded(g, ops);
  SPINDLE_CUDA_CHECK(cudaEventRecord(g.done, stream_));
  ++n_eager_steps_;
  ++g_op_by_op;
}

void cuda_backend::graph_abort() {
  rec_ = nullptr;
  rec_ops_.clear();
}

void cuda_backend::graph_end() {
  if (!rec_) return;
  g_record_ns += now_ns() - rec_begin_ns_;
  step_graph& g = *rec_;
  rec_ = nullptr;
  rec_sig_.append((const char*)&rec_stage_used_, sizeof rec_stage_used_);
  std::vector<std::function<void()>> ops;
  ops.swap(rec_ops_);
  if (g.exec && g.signature == rec_sig_) {
    SPINDLE_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++n_replays_;
    ++g_replayed;
  } else if (!g.exec && g.signature != rec_sig_) {
    // A shape seen for the first time (or changed before it ever repeated): run it op by op and keep its
    // signature; the graph is captured when the same step comes again, so one-off shapes never pay for one.
    run_recorded(g, ops);
    g.signature.swap(rec_sig_);
    ++g_first_seen;
  } else {
    SPINDLE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      run_recorded(g, ops);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      g.signature.clear();
      throw;
    }
    SPINDLE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    if (g.exec) {
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(g.exec, graph, &info) != cudaSuccess) {
        cudaGetLastError();
        cudaGraphExecDestroy(g.exec);
        g.exec = nullptr;
      }
    }
    if (!g.exec) {
      const cudaError_t e = cudaGraphInstantiate(&g.exec, graph, 0);
      if (e != cudaSuccess) {
        cudaGraphDestroy(graph);
        g.exec = nullptr;
        g.signature.clear();
        cuda_check(e, "cudaGraphInstantiate");
      }
    }
    cudaGraphDestroy(graph);
    g.signature.swap(rec_sig_);
    SPINDLE_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++n_captures_;
    ++g_captured;
  }
  SPINDLE_CUDA_CHECK(cudaEventRecord(g.done, stream_));
}

// A step that needs the host mid-way: play what it recorded now; its key records no more (such steps would
// only pay for recording).
void cuda_backend::leave_recording() {
  if (!rec_) return;
  rec_->disabled = true;
  play_recorded_eagerly();
}

void cuda_backend::graph_setup_from_env() {
  const char* off = std::getenv("SPINDLE_CUDA_GRAPHS");
  graphs_enabled_ = !(off && std::strcmp(off, "0") == 0);
  const char* pdl = std::getenv("SPINDLE_CUDA_PDL");
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_);
  pdl_ = major >= 9 && !(pdl && std::strcmp(pdl, "0") == 0);
  const char* mmv = std::getenv("SPINDLE_CUDA_MMV");
  mmv8_ = !(mmv && std::strcmp(mmv, "x32") == 0);
  const char* moe = std::getenv("SPINDLE_CUDA_MOE");
  moe_grouped_ = !(moe && std::strcmp(moe, "per-expert") == 0);
  const char* fuse = std::getenv("SPINDLE_CUDA_FUSE");
  fused_ = !(fuse && std::strcmp(fuse, "0") == 0);
  const char* warps = std::getenv("SPINDLE_CUDA_ATTN_WARPS");
  attn_fewer_warps_ = !warps                              ? attn_warps::large_launches
                      : std::strcmp(warps, "8") == 0       ? attn_warps::never
                      : std::strcmp(warps, "context") == 0 ? attn_warps::every_launch
                                                           : attn_warps::large_launches;
  const char* split = std::getenv("SPINDLE_CUDA_MMQ_SPLIT");
  if (split && std::atof(split) >= 0) mmq_split_tiles_per_sm_ = std::atof(split);
  const char* stats = std::getenv("SPINDLE_CUDA_GRAPH_STATS");
  graph_stats_ = stats && std::strcmp(stats, "1") == 0;
}

void cuda_backend::graph_teardown() {
  if (graph_stats_) {
    std::fprintf(stderr, "cuda step graphs: %llu replayed, %llu captured, %llu steps op by op\n",
                 (unsigned long long)n_replays_, (unsigned long long)n_captures_, (unsigned long long)n_eager_steps_);
  }
  for (auto& kv : graphs_) destroy_graph(kv.second);
  graphs_.clear();
}

}  // namespace spindle
