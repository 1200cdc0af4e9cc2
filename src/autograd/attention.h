// autograd/attention.h — causal multi-head self-attention as one differentiable op.
//
// Contract
// - causal_attention(qkv, batch, seq, heads) takes the fused projections of N = batch * seq
//   tokens, qkv (N, 3 * D) with the columns laid out [q | k | v], each block D = heads * hd
//   wide and head h owning columns [h * hd, (h + 1) * hd) of its block (rows are tokens,
//   sequence-major inside a batch element: row b * seq + t). It returns (N, D): for every
//   batch element b and head h,
//       out_bh = softmax(mask(q_bh k_bh^T / sqrt(hd))) v_bh,
//   where mask keeps key t' <= query t (GPT's causal mask). Heads never mix: a rank holding
//   a subset of the heads (tensor parallelism) computes exactly its columns of the result.
// - The op keeps the attention probabilities P (batch * heads * seq * seq floats) for the
//   backward pass; attention_saved_bytes() tells how many (for memory accounting).
// - Shapes are checked (InvalidArgument naming them): qkv must be 2-D with N = batch * seq
//   rows and 3 * D columns divisible by heads.
// - Work over (batch, head) pairs is split over the graph's ThreadPool (each pair writes
//   disjoint columns), so results do not depend on the pool size.
// Thread-safety: as Graph.
#pragma once

#include <cstdint>

#include "autograd/graph.h"

namespace dtrain {

Var causal_attention(const Var& qkv, int64_t batch, int64_t seq, int64_t heads);

inline int64_t attention_saved_bytes(int64_t batch, int64_t seq, int64_t heads) {
  return batch * heads * seq * seq * static_cast<int64_t>(sizeof(float));
}

}  // namespace dtrain
