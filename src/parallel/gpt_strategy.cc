#include "parallel/gpt_strategy.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/error.h"
#include "nn/transformer_sample.h"

namespace dtrain {

GptStrategy::GptStrategy(const char* name, Communicator& world, const MpConfig& config, const data::TextData& text,
                         Instrument* instrument)
    : name_(name), world_(world), text_(text), instrument_(instrument), trainer_(world, config, text, instrument) {}

std::string GptStrategy::describe() const {
  const MpConfig& c = trainer_.config();
  std::ostringstream os;
  os << "gpt " << c.model.spec() << " on " << text_.source << " (" << text_.ids.size() << " chars, vocab "
     << text_.vocab.size() << "), mesh dp " << c.mesh.dp << " x tp " << c.mesh.tp << " x pp " << c.mesh.pp
     << ", schedule " << c.schedule << " M " << c.micro << " V " << c.virtual_stages << ", zero " << c.zero
     << ", optimizer " << c.optimizer.kind << ", partition";
  for (int b : trainer_.partition()) os << " " << b;
  return os.str();
}

LossAcc GptStrategy::train_round(const Round& round, const ProgressFn& progress) {
  DT_CHECK_EQ(round.first_step, trainer_.steps_done(), InvalidArgument, "GPT round's first step");
  double sum = 0;
  for (int64_t s = 0; s < round.steps; ++s) {
    sum += trainer_.step();
    if (progress) progress(s + 1, sum / static_cast<double>(s + 1));
  }
  LossAcc r;
  r.loss = round.steps > 0 ? sum / static_cast<double>(round.steps) : 0;
  r.examples = round.steps * round.batch;
  return r;
}

LossAcc GptStrategy::evaluate(ThreadPool*) {
  last_val_ = trainer_.evaluate();
  LossAcc r;
  r.loss = last_val_;
  return r;
}

void GptStrategy::save(StateSections& state) const {
  state.emplace_back("params", float_bytes(trainer_.local_params()));
  state.emplace_back("optimizer", trainer_.local_optimizer().save_state());
  std::vector<uint8_t> step(sizeof(int64_t));
  const int64_t s = trainer_.steps_done();
  std::memcpy(step.data(), &s, sizeof s);
  state.emplace_back("gpt_step", std::move(step));
}

void GptStrategy::load(const StateSections& state) {
  load_floats(state, "params", trainer_.local_params(), "this rank's GPT parameters");
  const auto* opt = find_section(state, "optimizer");
  DT_CHECK(opt != nullptr, Corrupt, "checkpoint has no optimizer state");
  trainer_.local_optimizer().load_state(*opt);
  const auto* step = find_section(state, "gpt_step");
  DT_CHECK(step != nullptr && step->size() == sizeof(int64_t), Corrupt, "checkpoint has no GPT step counter");
  int64_t s = 0;
  std::memcpy(&s, step->data(), sizeof s);
  trainer_.set_steps_done(s);
}

void GptStrategy::finish(const std::string& checkpoint_dir) {
  const MpConfig& c = trainer_.config();
  GptStage dense(c.model, 0, c.model.num_units());
  dense.allocate(0);
  trainer_.gather_dense(dense);
  if (world_.rank() != 0) return;
  GptCheckpoint ck{c.model, text_.vocab, trainer_.steps_done(), last_val_,
                   {dense.param_span().begin(), dense.param_span().end()}};
  save_gpt_checkpoint(model_file(checkpoint_dir), ck);
}

Metrics GptStrategy::stats() {
  stats_ = trainer_.stats();
  const MpStats& s = stats_;
  Metrics m = {{"bubble_measured", s.bubble_measured},
               {"bubble_replayed", s.bubble_replayed},
               {"bubble_replayed_median", s.bubble_replayed_median},
               {"bubble_formula", s.bubble_formula},
               {"bubble_steps", s.steps_timed},
               {"rank0_param_bytes", static_cast<double>(s.bytes.params)},
               {"rank0_grad_bytes", static_cast<double>(s.bytes.grads)},
               {"rank0_optimizer_bytes", static_cast<double>(s.bytes.optimizer)},
               {"zero_allreduce_calls", static_cast<double>(s.zero_comm.allreduce)},
               {"zero_allgather_calls", static_cast<double>(s.zero_comm.allgather)},
               {"zero_reduce_scatter_calls", static_cast<double>(s.zero_comm.reduce_scatter)},
               {"zero_bus_bytes", s.zero_comm.bus_bytes},
               {"tp_allreduce_forward", static_cast<double>(s.tp.allreduce_fwd)},
               {"tp_allreduce_backward", static_cast<double>(s.tp.allreduce_bwd)},
               {"tp_bytes", static_cast<double>(s.tp.bytes)},
               {"local_params", static_cast<double>(s.local_params)},
               {"model_params", static_cast<double>(s.model_params)}};
  for (size_t q = 0; q < s.max_in_flight.size(); ++q) {
    m.emplace_back("stage" + std::to_string(q) + "_max_in_flight", s.max_in_flight[q]);
    m.emplace_back("stage" + std::to_string(q) + "_peak_activation_bytes", static_cast<double>(s.peak_activation_bytes[q]));
  }
  return m;
}

std::string GptStrategy::summary() {
  const MpStats& st = stats_;
  const MpConfig& c = trainer_.config();
  std::ostringstream os;
  char line[256];
  if (c.mesh.pp > 1) {
    std::snprintf(line, sizeof line, "pipeline bubble: measured %.3f, replayed %.3f (stage medians %.3f), formula %.3f (%d steps); in flight per stage:",
                  st.bubble_measured, st.bubble_replayed, st.bubble_replayed_median, st.bubble_formula, st.steps_timed);
    os << line;
    for (size_t q = 0; q < st.max_in_flight.size(); ++q) {
      std::snprintf(line, sizeof line, " %d (%.1f KiB)", st.max_in_flight[q], static_cast<double>(st.peak_activation_bytes[q]) / 1024.0);
      os << line;
    }
    os << "\n";
  }
  std::snprintf(line, sizeof line, "rank 0 model state: params %.2f MB, grads %.2f MB, optimizer %.2f MB (dense model %lld params = %.2f MB x 4)\n",
                st.bytes.params / 1e6, st.bytes.grads / 1e6, st.bytes.optimizer / 1e6,
                static_cast<long long>(st.model_params), static_cast<double>(st.model_params) * 4 / 1e6);
  os << line;
  if (c.mesh.tp > 1) {
    std::snprintf(line, sizeof line, "tensor parallel: %lld all-reduces forward, %lld backward on rank 0\n",
                  static_cast<long long>(st.tp.allreduce_fwd), static_cast<long long>(st.tp.allreduce_bwd));
    os << line;
  }
  return os.str();
}

}  // namespace dtrain
