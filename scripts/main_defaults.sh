# Sourced by scripts/main.sh and scripts/bench_sitting.sh: the main job's choices, so the
# sitting measures exactly what the README's command runs. Sets `ranks` (one per CPU core, at
# least 2, at most 8; empty when the arguments choose -n) and `main_args` (the defaults the
# arguments do not set), and prints what was chosen.
#
# Why these defaults: with 32 examples per rank (the generic --batch 64) a step of the
# 784-256-128-10 MLP is ~1 ms of compute against an all-reduce of 0.9 MB, so 2 ranks ran
# 1.2-1.4x one rank. 128 examples per rank (global batch 256) with momentum 0.9 and lr 0.1
# trains to a better test accuracy in the same 5 epochs (0.871 vs 0.855, 2026-11-24) and
# scales 1.7-1.8x; --baseline trains the same global batch on one rank.
main_defaults() {
  local a has_n="" has_batch="" has_opt="" strategy=ddp prev=""
  for a in "$@"; do
    case $a in
      -n | --ranks | --ranks=*) has_n=1 ;;
      --batch | --batch=*) has_batch=1 ;;
      --optimizer | --optimizer=* | --lr | --lr=*) has_opt=1 ;;
      --strategy=*) strategy=${a#--strategy=} ;;
    esac
    [[ $prev == --strategy ]] && strategy=$a
    prev=$a
  done
  ranks=$(nproc)
  ((ranks < 2)) && ranks=2
  ((ranks > 8)) && ranks=8
  [[ -n $has_n ]] && ranks=""
  main_args=()
  local said=()
  [[ -n $ranks ]] && main_args+=(-n "$ranks") && said+=("$ranks ranks, one per CPU core")
  if [[ $strategy == ddp ]]; then
    [[ -z $has_batch ]] && main_args+=(--batch 256) && said+=("global batch 256")
    [[ -z $has_opt ]] && main_args+=(--optimizer momentum --lr 0.1) && said+=("momentum 0.9, lr 0.1")
  fi
  if ((${#said[@]})); then
    local line
    printf -v line '%s, ' "${said[@]}"
    echo "dtrain main job: ${line%, } (pass -n, --batch, --optimizer/--lr to choose)"
  fi
  return 0
}
