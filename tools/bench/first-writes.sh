#!/usr/bin/env bash
# A thin extent filled in random order against one written sequentially, on a
# real volume served over NBD, bypassing the page cache:
#   tools/bench/first-writes.sh [PROXIMA] [ROUNDS] [FILL]
# creates a default volume (--direct --preallocate) in a scratch directory, fills
# extent `rnd` (4 GiB) with fio 4 KiB random writes QD16 (every block once, FILL
# bytes, default 4g) and extent `seq` (4 GiB) with 1 MiB sequential writes, waits
# until the idle destage has emptied the staging area, prints the status
# (runs per extent, fragmentation, reserved bytes), then reads each extent
# sequentially (1 MiB QD8) ROUNDS times, interleaved, and prints MB/s per read.
# Needs fio with its nbd engine and about 25 GiB free in $TMPDIR.
set -euo pipefail
proxima=${1:-proxima}
rounds=${2:-3}
fill=${3:-4g}
scratch=$(mktemp -d)
volume=$scratch/vol
socket=$scratch/nbd.sock
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$scratch"' EXIT

serve() {
  "$proxima" serve "$volume" --socket "$socket" 2>>"$scratch/serve.log" &
  server=$!
  for _ in $(seq 100); do [ -S "$socket" ] && return; sleep 0.1; done
  echo "the server did not start: $(cat "$scratch/serve.log")" >&2
  exit 1
}
stop() { kill -TERM "$server"; wait "$server" || true; rm -f "$socket"; }
uri() { echo "nbd+unix:///$1?socket=$socket"; }
mb_per_second() {
  python3 -c 'import json,sys; t=sys.stdin.read(); j=json.loads(t[t.index("{"):]); r=j["jobs"][0]; d=r["read"] if r["read"]["io_bytes"] else r["write"]; print("%.1f" % (d["bw_bytes"]/1e6))'
}

"$proxima" volume create "$volume" --direct --preallocate >/dev/null
"$proxima" extent create "$volume" rnd --size 4G >/dev/null
"$proxima" extent create "$volume" seq --size 4G >/dev/null
serve
echo "fill rnd (random 4 KiB, $fill): $(fio --name=fill --ioengine=nbd --uri="$(uri rnd)" --rw=randwrite --bs=4k \
  --iodepth=16 --size="$fill" --output-format=json | mb_per_second) MB/s"
echo "fill seq (sequential 1 MiB): $(fio --name=fill --ioengine=nbd --uri="$(uri seq)" --rw=write --bs=1m \
  --iodepth=8 --size=4g --output-format=json | mb_per_second) MB/s"
until "$proxima" status "$volume" --json | tail -1 |
  python3 -c 'import json,sys; sys.exit(json.load(sys.stdin)["staging"]["used_blocks"] != 0)'; do
  sleep 1
done
"$proxima" status "$volume" --json | tail -1 | python3 -c '
import json, sys
s = json.load(sys.stdin)
for e in s["extents"]:
    print(f"{e[\"name\"]}: {e[\"mapped_block_count\"]} blocks mapped in {e[\"run_count\"]} runs")
print(f"fragmentation {s[\"fragmentation\"]:.5f}, reserved {s[\"reserved_bytes\"]} of {s[\"free_bytes\"]} free bytes")'
for round in $(seq "$rounds"); do
  for extent in rnd seq; do
    echo "round $round read $extent: $(fio --name=read --ioengine=nbd --uri="$(uri $extent)" --rw=read --bs=1m \
      --iodepth=8 --size=4g --output-format=json | mb_per_second) MB/s"
  done
done
stop
