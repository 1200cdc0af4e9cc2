#!/usr/bin/env bash
# Measures dtrain's point-to-point transports beside the machine's raw limits in one sitting:
# memcpy bandwidth and loopback TCP (throughput, blocking and busy-poll ping-pong) from
# ../shared/peers, then `dtrain bench p2p` for shm and tcp. Writes raw output and JSON to
# OUT (default out/p2p-<date>) and prints a summary table for docs/PERFORMANCE.md.
# Needs the peer programs built: copy ../shared/peers somewhere writable and run its
# install.sh (or build.sh), then pass PEERS=that/dir (default /tmp/peers).
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${PEERS:-/tmp/peers}
OUT=${OUT:-out/p2p-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
[[ -x build/bin/dtrain ]] || scripts/build.sh
{ date -Is; uptime; nproc; } > "$OUT/env.txt"
if [[ -x $PEERS/bin/membw ]]; then
  "$PEERS/bin/membw" 3 0.3 > "$OUT/membw.csv"
  "$PEERS/bin/tcp_bench" $((1 << 30)) 3 20000 > "$OUT/tcp.csv"
else
  echo "no peer programs in $PEERS (see the header of this script); measuring dtrain only" >&2
fi
build/bin/dtrain bench p2p -n 2 --transport shm,tcp --sizes 8:256M --seconds 0.3 --json "$OUT/dtrain_p2p.json" \
  | tee "$OUT/dtrain_p2p.txt"
uptime >> "$OUT/env.txt"
echo "results in $OUT"
