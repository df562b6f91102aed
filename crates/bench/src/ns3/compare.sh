#!/bin/sh
# imp's simulator against ns-3 on the same dumbbell: N bulk NewReno flows through a
# 100 Mbit/s, 20 ms bottleneck with a 500 KB drop-tail queue (access links 1 Gbit/s,
# 1 ms), SECONDS of virtual time, for N in FLOWS. Prints wall and CPU seconds per
# simulated second and events per second for each, and the ratio ns-3 / imp.
#
#   crates/bench/src/ns3/compare.sh [SECONDS] [FLOWS...]   (default: 10 1 10 100)
#
# Needs a release `imp` (cargo build --release -p impnet-cli; IMP=path to override).
# The ns-3 side (dumbbell.cc next to this script) is built with g++ against Debian's
# libns3-dev (3.37); without g++ or ns-3 headers it is skipped, saying why. CPU time is
# the fairer number on a shared machine; wall time is what the issue quotes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
imp=${IMP:-${CARGO_TARGET_DIR:-$root/target}/release/imp}
seconds=${1:-10}
[ $# -gt 0 ] && shift
flows=${*:-1 10 100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

[ -x "$imp" ] || { echo "no imp binary at $imp; cargo build --release -p impnet-cli" >&2; exit 1; }
ns3=""
if ! command -v g++ >/dev/null; then
  echo "ns-3 skipped: no g++" >&2
elif [ ! -f /usr/include/ns3/point-to-point-layout-module.h ]; then
  echo "ns-3 skipped: no ns-3 headers (apt-get install libns3-dev)" >&2
else
  ns3=$work/dumbbell
  g++ -O2 -std=c++17 "$here/dumbbell.cc" -o "$ns3" -lns3-point-to-point-layout \
    -lns3-point-to-point -lns3-applications -lns3-internet -lns3-traffic-control \
    -lns3-network -lns3-core 2>"$work/gcc.log" || { echo "ns-3 skipped: build failed" >&2; cat "$work/gcc.log" >&2; ns3=""; }
fi

# cpu SECONDS of the last command, from /usr/bin/time's -f "%U %S %e" line in FILE.
cpu() { awk 'END { print $1 + $2 }' "$1"; }
wall() { awk 'END { print $3 }' "$1"; }

printf '%-6s %-5s %10s %10s %12s %12s %14s\n' flows sim "wall s" "cpu s" "wall/sim s" "cpu/sim s" "events/s"
for n in $flows; do
  cat > "$work/db$n.toml" <<TOML
name = "bench-dumbbell-$n"
duration = "${seconds}s"
seed = 1
[dumbbell]
pairs = $n
access = { rate = "1gbit", delay = "1ms" }
bottleneck = { rate = "100mbit", delay = "20ms", queue = "500K" }
flow = { type = "bulk", bytes = "1G", record = "64K" }
tcp = { send_buffer = "2M", recv_buffer = "4M" }
TOML
  /usr/bin/time -f "%U %S %e" -o "$work/t" "$imp" sim "$work/db$n.toml" --json > "$work/imp.json"
  events=$(sed -n 's/^  "steps": \([0-9]*\),/\1/p' "$work/imp.json")
  iw=$(wall "$work/t"); ic=$(cpu "$work/t")
  awk -v n="$n" -v s="$seconds" -v w="$iw" -v c="$ic" -v e="$events" 'BEGIN {
    printf "%-6s %-5s %10.3f %10.3f %12.4f %12.4f %14.0f\n", n, "imp", w, c, w / s, c / s, e / c }'
  if [ -n "$ns3" ]; then
    /usr/bin/time -f "%U %S %e" -o "$work/t" "$ns3" --flows="$n" --seconds="$seconds" > "$work/ns3.json"
    nevents=$(sed -n 's/.*"events": \([0-9]*\).*/\1/p' "$work/ns3.json")
    nw=$(wall "$work/t"); nc=$(cpu "$work/t")
    awk -v n="$n" -v s="$seconds" -v w="$nw" -v c="$nc" -v e="$nevents" -v iw="$iw" -v ic="$ic" 'BEGIN {
      printf "%-6s %-5s %10.3f %10.3f %12.4f %12.4f %14.0f   ns-3/imp: wall %.1fx, cpu %.1fx\n",
        n, "ns-3", w, c, w / s, c / s, e / c, w / iw, c / ic }'
  fi
done
