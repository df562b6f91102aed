#!/bin/bash
# Run upstream packetdrill's gtests/net/tcp scripts one by one against imp's shim.
#
#   tests/packetdrill/run-upstream.sh PACKETDRILL_CHECKOUT [SHIM.so] [DIR...]
#
# PACKETDRILL_CHECKOUT is a google/packetdrill checkout with packetdrill built in
# gtests/net/packetdrill; SHIM.so defaults to target/release/libimpnet_packetdrill.so
# (cargo build --release -p impnet-packetdrill). DIRs limit the run to those
# directories of gtests/net/tcp (default: all). IP_VERSION=ipv6 in the environment
# runs them in packetdrill's IPv6 mode (the shim's address fd3d:fa7b:d17d::2), on a
# link of 1520 bytes: the scripts, written for IPv4, expect an MSS of 1460.
#
# Each script runs in a new network namespace (needs root, or an unprivileged user
# namespace: unshare -rn) holding a dummy (or unattached TUN) "tun0", so the scripts' own shell commands
# (../common/defaults.sh sets sysctls and a qdisc on tun0) change nothing on this
# host. Output: one line per script (PASS or FAIL and packetdrill's first error
# line), then a table of passes per directory.
set -u
checkout=${1:?usage: run-upstream.sh PACKETDRILL_CHECKOUT [SHIM.so] [DIR...]}
shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
shim=${1:-$repo/target/release/libimpnet_packetdrill.so}
[ $# -gt 0 ] && shift
packetdrill=$checkout/gtests/net/packetdrill/packetdrill
tcp=$checkout/gtests/net/tcp
[ -x "$packetdrill" ] || { echo "no packetdrill binary at $packetdrill (build it: ./configure && make)" >&2; exit 2; }
if [ "$shim" = linux ]; then
    shim_args=()
else
    [ -f "$shim" ] || { echo "no shim at $shim (cargo build --release -p impnet-packetdrill)" >&2; exit 2; }
    shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")
    shim_args=(--so_filename="$shim")
fi
if [ "$(id -u)" = 0 ]; then unshare=(unshare -n); else unshare=(unshare -rn); fi
# sysctls=on: the shim reads the Fast Open and timestamp sysctls the scripts set in
# their namespace. TFO_COOKIE: the cookie Linux (and imp) gives packetdrill's remote
# address at the shim's under defaults.sh's tcp_fastopen_key (upstream's run_all.py
# defines it for its own addresses), and run_all.py's other definitions.
case "${IP_VERSION:-ipv4}" in
ipv4) address=(--local_ip=192.168.0.2 -D TFO_COOKIE=de4f234f0f433a55 -D CODE=host_unreachable
        -D CMSG_LEVEL_IP=SOL_IP -D CMSG_TYPE_RECVERR=IP_RECVERR); so_flags="sysctls=on" ;;
ipv6) address=(--ip_version=ipv6 --local_ip=fd3d:fa7b:d17d::2 -D TFO_COOKIE=465a8e5918044636
        -D CMSG_LEVEL_IP=SOL_IPV6 -D CMSG_TYPE_RECVERR=IPV6_RECVERR); so_flags="mtu=1520 sysctls=on" ;;
*) echo "IP_VERSION must be ipv4 or ipv6" >&2; exit 2 ;;
esac
# The kernel's own run on the same 1520-byte link in IPv6 mode (packetdrill's --mtu).
linux_mtu=
[ "${IP_VERSION:-ipv4}" = ipv6 ] && linux_mtu=--mtu=1520
dirs=("$@")
[ ${#dirs[@]} -eq 0 ] && mapfile -t dirs < <(cd "$tcp" && ls -d */ | tr -d / | grep -v '^common$')

declare -A pass total
for dir in "${dirs[@]}"; do
    pass[$dir]=0
    total[$dir]=0
    while IFS= read -r script; do
        name=${script#"$tcp/"}
        # A script that names its own IPv4 address (--local_ip= at its top) gets the
        # shim at that address (packetdrill's command line would override the script's).
        flags=$so_flags
        args=("${address[@]}")
        local=$(sed -n 's/^--local_ip=\([0-9.]*\)$/\1/p' "$script" | head -1)
        if [ "${IP_VERSION:-ipv4}" = ipv4 ] && [ -n "$local" ]; then
            flags="$flags local_ip=$local"
            args=()
            for arg in "${address[@]}"; do
                case $arg in --local_ip=*) ;; *) args+=("$arg") ;; esac
            done
        fi
        if [ "$shim" = linux ]; then
            # The kernel under test: packetdrill makes its own tun0; the namespace's
            # loopback up, as on a booted machine.
            out=$(cd "$(dirname "$script")" && timeout 120 "${unshare[@]}" sh -c '
                ip link set lo up
                script=$1; shift
                exec "$0" "$@" "$script" 2>&1' \
                "$packetdrill" "$(basename "$script")" ${args[@]+"${args[@]}"} $linux_mtu 2>&1)
        else
            out=$(cd "$(dirname "$script")" && timeout 120 "${unshare[@]}" sh -c '
                { ip link add tun0 type dummy || ip tuntap add dev tun0 mode tun; } 2>/dev/null
                ip link set tun0 up 2>/dev/null
                script=$1; shift
                exec "$0" "$@" "$script" 2>&1' \
                "$packetdrill" "$(basename "$script")" "${shim_args[@]}" ${args[@]+"${args[@]}"} --so_flags="$flags" 2>&1)
        fi
        rc=$?
        total[$dir]=$((total[$dir] + 1))
        if [ $rc -eq 0 ]; then
            pass[$dir]=$((pass[$dir] + 1))
            echo "PASS $name"
        else
            reason=$(printf '%s\n' "$out" | grep -v '^\s*$' | grep -m1 -E 'error|Error|fail|timing|expected|assert|Timed' || printf '%s\n' "$out" | tail -1)
            [ $rc -eq 124 ] && reason="timed out after 120 s (real time)"
            echo "FAIL $name: ${reason:0:300}"
        fi
    done < <(find "$tcp/$dir" -name '*.pkt' | sort)
done
echo
echo "| directory | passed | scripts |"
echo "|---|---|---|"
all_pass=0; all=0
for dir in "${dirs[@]}"; do
    echo "| $dir | ${pass[$dir]} | ${total[$dir]} |"
    all_pass=$((all_pass + pass[$dir])); all=$((all + total[$dir]))
done
echo "| all | $all_pass | $all |"
