#!/usr/bin/env bash
# One sitting of the headline measurements, dtrain beside its peers, back to back on the same
# machine: p2p vs raw limits, all-reduce (shm n=2/4/8, tcp n=2) and all-gather /
# reduce-scatter / broadcast vs OpenMPI and Gloo, ddp vs PyTorch DDP and the 2-process
# compute ceiling, HOGWILD! on news20 and a9a.
# Everything goes to OUT (default out/sitting-<time>); `uptime` is logged before each step.
# Needs the peers built in PEERS (copy ../shared/peers somewhere writable, run install.sh)
# and, for HOGWILD!, news20 and a9a in the data directory (DTRAIN_DATA_DIR, default here
# ../shared/data; see 'dtrain data').
set -uo pipefail
cd "$(dirname "$0")/.."
PEERS=${PEERS:-/tmp/peers}
OUT=${OUT:-out/sitting-$(date +%Y%m%d-%H%M%S)}
B=build/bin/dtrain
T=${T:-0.3}
mkdir -p "$OUT"
export DTRAIN_DATA_DIR=${DTRAIN_DATA_DIR:-$(cd .. && pwd)/shared/data}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN="mpirun --oversubscribe"
step() { echo "== $1 $(uptime)" | tee -a "$OUT/log.txt"; shift; "$@" >> "$OUT/log.txt" 2>&1; }

OUT="$OUT/p2p" scripts/bench_p2p_vs_peers.sh > "$OUT/p2p.txt" 2>&1

S2="8,64K,1M,16M,64M,256M"
step "allreduce shm n=2 dtrain+ctx" $B bench collectives -n 2 --transport shm --shm-context --sizes $S2 --seconds $T
step "allreduce shm n=2 dtrain"     $B bench collectives -n 2 --transport shm --sizes $S2 --seconds $T
step "allreduce shm n=2 mpi"        $MPIRUN -np 2 "$PEERS/bin/mpi_coll" mpi_vader $T allreduce 8,65536,1048576,16777216,67108864,268435456
for n in 4 8; do
  step "allreduce shm n=$n dtrain+ctx" $B bench collectives -n $n --transport shm --shm-context --sizes 8,1M,64M --seconds $T
  step "allreduce shm n=$n mpi"        $MPIRUN -np $n "$PEERS/bin/mpi_coll" mpi_vader $T allreduce 8,1048576,67108864
done
step "allreduce tcp n=2 dtrain" $B bench collectives -n 2 --transport tcp --sizes 8,64K,1M,64M --seconds $T
step "allreduce tcp n=2 mpi"    $MPIRUN -np 2 --mca btl self,tcp "$PEERS/bin/mpi_coll" mpi_tcp $T allreduce 8,65536,1048576,67108864
step "allreduce tcp n=2 gloo"   "$PEERS/bin/gloo_coll" 2 $T allreduce_ring 8,65536,1048576,67108864 gloo
for n in 2 4; do
  step "ag/rs/bcast shm n=$n dtrain+ctx" $B bench collectives -n $n --transport shm --shm-context --op allgather,reducescatter,broadcast --sizes 1M,16M --seconds $T
  step "ag/rs/bcast shm n=$n mpi"        $MPIRUN -np $n "$PEERS/bin/mpi_coll" mpi_vader $T allgather,reduce_scatter,bcast 1048576,16777216
done

M="--model mlp:784-1024-1024-1024-10 --epochs 1 --optimizer momentum --lr 0.05 --seed 1 --quiet"
step "ddp 1 rank"          $B train --strategy ddp -n 1 $M --batch 256 --json "$OUT/ddp1.json"
step "ddp 2 ranks"         $B train -n 2 $M --batch 256 --json "$OUT/ddp2.json"
step "pytorch single 1"    /usr/bin/python3 "$PEERS/py/ddp_mlp.py" single 1 60 10
step "pytorch ddp 2"       /usr/bin/python3 "$PEERS/py/ddp_mlp.py" ddp 2 60 10

# The ceiling of 2-rank scaling on this machine: one process training the same MLP step at
# batch 256, then two independent processes at batch 128 at once (no communication at all).
CB=build/bin/compute_bench
if [[ -x $CB ]]; then
  step "ceiling: 1 process batch 256" $CB --benchmark_filter='MlpTrainStep/batch:256/threads:1/ftz:0' --benchmark_min_time=3
  step "ceiling: 2 processes batch 128" bash -c "$CB --benchmark_filter='MlpTrainStep/batch:128/threads:1/ftz:0' --benchmark_min_time=3 & $CB --benchmark_filter='MlpTrainStep/batch:128/threads:1/ftz:0' --benchmark_min_time=3; wait"
fi

N="--model softmax --data news20 --normalize --batch 1 --lr 0.5 --epochs 10"
step "hogwild news20 1 thread"  $B train $N --strategy hogwild --threads 1 --json "$OUT/hogn1.json"
step "hogwild news20 2 threads" $B train $N --strategy hogwild --threads 2 --json "$OUT/hogn2.json"
H="--model logreg --data a9a --batch 1 --lr 0.01 --epochs 5"
step "hogwild a9a 1 thread"  $B train $H --strategy hogwild --threads 1 --json "$OUT/hog1.json"
step "hogwild a9a 2 threads" $B train $H --strategy hogwild --threads 2 --json "$OUT/hog2.json"
step "locked a9a 2 threads"  $B train $H --strategy hogwild-lock --threads 2 --json "$OUT/lock2.json"
# --- HOGWILD! scaling (issue 14 part 5): plain, locked, hogwild-hot at 1 and 2 threads, news20 + a9a.
step "hogwild scaling (bench/hogwild_scaling.sh)" bench/hogwild_scaling.sh
echo "== done $(uptime)" | tee -a "$OUT/log.txt"
echo "results in $OUT"
