// cli/train_mp.h — `dtrain train` for the GPT and the model-parallel strategies.
//
// wants_model_parallel(args) is true when the arguments ask for the transformer
// (--model gpt...) or a model-parallel strategy (--strategy tp|pp|zero|hybrid); train_main
// then hands the whole command to train_mp_main (one line in cli/train_cmd.cc).
//
//   dtrain train --model gpt:layers=4,heads=4,width=128,context=64 --data text:input.txt.gz
//                [--strategy single|tp|pp|zero|hybrid] [-n N] [--dp D --tp T --pp P]
//                [--microbatches M --schedule gpipe|1f1b|interleaved --virtual-stages V
//                 --recompute] [--zero 0|1|2|3] [--steps N | --epochs E] [--batch B]
//                [--lr --min-lr --warmup --weight-decay --clip --seed] [--eval-every K]
//                [--checkpoint FILE] [--json FILE] [--trace FILE --trace-steps S]
//
// Output: a line per --log-every steps (loss, learning rate, ms/step), a line per evaluation
// (validation loss), a summary with the pipeline bubble (measured, replayed and the formula),
// activation memory per stage, ZeRO bytes and communication, tensor-parallel collective
// counts; --json writes all of it (plus every step's loss); --checkpoint the dense model
// for `dtrain generate`; --trace a Chrome timeline with one track per rank (= pipeline stage).
// Errors are InvalidArgument with the fix ("--batch 10 must be divisible by dp 4 x ...").
#pragma once

#include <string>
#include <vector>

namespace dtrain::cli {

bool wants_model_parallel(const std::vector<std::string>& args);
int train_mp_main(const std::vector<std::string>& args);

}  // namespace dtrain::cli
