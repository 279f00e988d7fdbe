#!/usr/bin/env bash
# CI check of `proxima sweep --ray`: installs the driver's Ray (setup.sh),
# starts a local Ray cluster of a head and a second worker node on this
# machine, runs the 24-cell sweep of crates/cli/tests/data/sweep-small.toml
# locally and through the cluster, and requires the same table (CSV and
# Arrow, byte for byte); then removes a third of the cluster run's stored
# cells and requires a rerun through Ray to run exactly those. Stops the
# processes it started, and only those.
set -euo pipefail
cd "$(dirname "$0")/../.."

tools/ray/setup.sh
venv="${PROXIMA_RAY_VENV:-$HOME/.cache/proxima/ray-venv}"
ray="$venv/bin/ray"
cargo build --release -p proxima-cli
proxima="$PWD/target/release/proxima"
spec=crates/cli/tests/data/sweep-small.toml

work="$(mktemp -d)"
port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
address="127.0.0.1:$port"
export RAY_USAGE_STATS_ENABLED=0
# The workers install the proxima binary under the temporary folder: this run's.
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"
pids=()
stop_cluster() {
  # `ray start --block` stops its node's processes when it is terminated.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap stop_cluster EXIT

"$ray" start --head --block --node-ip-address 127.0.0.1 --port "$port" --num-cpus 1 \
  --include-dashboard=false --disable-usage-stats --temp-dir "$work/ray-session" >"$work/head.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
  "$ray" status --address "$address" >/dev/null 2>&1 && break
  sleep 1
done
"$ray" start --block --node-ip-address 127.0.0.1 --address "$address" --num-cpus 1 >"$work/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
  [ "$("$ray" status --address "$address" 2>/dev/null | grep -c ' node_')" -ge 2 ] && break
  sleep 1
done
"$ray" status --address "$address" | grep -q '2.0 CPU' || { echo "the Ray cluster has not two CPUs"; cat "$work"/*.log; exit 1; }

field() { tail -1 | "$venv/bin/python" -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }

"$proxima" sweep "$spec" --out "$work/local" >"$work/local.out"
"$proxima" sweep "$spec" --out "$work/ray" --ray "$address" >"$work/ray.out"
[ "$(field ran <"$work/ray.out")" = 24 ] || { echo "the Ray sweep did not run 24 cells"; cat "$work/ray.out"; exit 1; }
cmp "$work/local/sweep.csv" "$work/ray/sweep.csv"
cmp "$work/local/sweep.arrow" "$work/ray/sweep.arrow"

find "$work/ray/cells" -name '*.json' | sort | head -8 | xargs rm
"$proxima" sweep "$spec" --out "$work/ray" --ray "$address" >"$work/resumed.out"
[ "$(field ran <"$work/resumed.out")" = 8 ] && [ "$(field skipped <"$work/resumed.out")" = 16 ] \
  || { echo "the resumed Ray sweep did not run just the 8 missing cells"; cat "$work/resumed.out"; exit 1; }
cmp "$work/local/sweep.csv" "$work/ray/sweep.csv"

echo "ray sweep: 24 cells through a local Ray cluster, the same table as the local run; a resumed run ran only the 8 missing cells"
