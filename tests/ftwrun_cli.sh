#!/usr/bin/env bash
# ftw-test: mode=script
# ftwrun's command line and its records from ranks on other hosts.
#
# - With "--", options ftwrun does not know go to the launcher together
#   with their values (MPICH's "-localhost ADDR" is not taken for the
#   application), and --launcher names the launcher.
# - A supervisor that cannot see the status directory (another host's
#   node-local /tmp) sends "start" and "fate" records over TCP to the
#   collector, trying its addresses in order (an unreachable one first);
#   the collector writes them as a local supervisor would, for an exit
#   code and a death by a signal, ignores malformed records, and on
#   SIGTERM takes what is queued and exits 0.
# - ftwrun leaves no collector and no status directory behind.
# Run from the top of the tree with MPIS="openmpi mpich".
set -u
top=$(pwd)
sup=$top/build/bin/ftw-supervise
n=0 failed=0
ok() { # COND-STATUS MESSAGE
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
    fi
}

mpis=${MPIS:-openmpi mpich}
nm=0
for m in $mpis; do nm=$((nm + 1)); done
echo "1..$((8 + 3 * nm))"

work=$(mktemp -d "${TMPDIR:-/tmp}/ftwrun_cli.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# ---- the collector and remote supervisors ---------------------------------
mkdir "$work/st"
"$sup" --collect "$work/st" >"$work/port" 2>"$work/collect.err" &
cpid=$!
port=""
for _ in $(seq 50); do
    { read -r port <"$work/port"; } 2>/dev/null && [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ]
ok $? "the collector listens and prints its port ($port)"

# 192.0.2.1 (TEST-NET-1) answers nobody: the supervisor goes on to the next.
OMPI_COMM_WORLD_RANK=5 timeout 20 "$sup" --status-dir "$work/absent" \
    --report-to "192.0.2.1,127.0.0.1:$port" -- sh -c 'exit 3'
rc5=$?
PMI_RANK=6 timeout 20 "$sup" --status-dir "$work/absent" \
    --report-to "localhost:$port" -- sh -c 'kill -9 $$'
rc6=$?
# Malformed records are dropped.
for rec in "fate x1 exit:0" "fate 7" "start 8" "nonsense 9 exit:0"; do
    printf '%s\n' "$rec" | timeout 5 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.stdin.buffer.read()); s.close()' "$port"
done
kill -TERM "$cpid"
timeout 10 tail --pid="$cpid" -f /dev/null
wait "$cpid"
crc=$?
[ "$rc5" -eq 3 ] && [ "$rc6" -eq 137 ]
ok $? "remote supervisors exit as their ranks did (3, 128+9): $rc5 $rc6"
[ "$(cat "$work/st/5" 2>/dev/null)" = exit:3 ] &&
    [ "$(cat "$work/st/6" 2>/dev/null)" = signal:KILL ]
ok $? "fates over TCP: rank 5 exit:3, rank 6 signal:KILL"
[ "$(cat "$work/st/host.5" 2>/dev/null)" = "$(hostname)" ] &&
    [ "$(cat "$work/st/host.6" 2>/dev/null)" = "$(hostname)" ]
ok $? "start records name the rank's host"
left=$(cd "$work/st" && ls -A | grep -vxE '5|6|host\.5|host\.6')
[ -z "$left" ]
ok $? "malformed records wrote nothing (${left:-none})"
[ "$crc" -eq 0 ] && ! kill -0 "$cpid" 2>/dev/null
ok $? "the collector exits 0 on SIGTERM"

# ---- ftwrun ---------------------------------------------------------------
cat >"$work/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int r, n, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (r == 0)
        printf("sum %d\n", sum);
    MPI_Finalize();
    return sum == n * (n - 1) / 2 ? 0 : 1;
}
EOF
mkdir "$work/tmp"
for m in $mpis; do
    "mpicc.$m" "$work/hello.c" -o "$work/hello.$m" || exit 1
    case $m in
    openmpi) largs=(--mca btl self,vader --map-by core) ; l=mpirun ;;
    mpich) largs=(-localhost 127.0.0.1 -launcher fork) ; l=mpiexec ;;
    esac
    out=$(TMPDIR=$work/tmp timeout 60 "$top/scripts/ftwrun" -np 2 --mpi "$m" --launcher "$l" \
          --report "$work/report.$m" "${largs[@]}" -- "$work/hello.$m" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "sum 1" ]
    ok $? "$m: launcher options and their values before -- reach $l ($rc: $out)"
    [ "$(cat "$work/report.$m")" = "$(printf '0 exit:0\n1 exit:0')" ]
    ok $? "$m: the report has both ranks"
    # MPI-4's initial error handler (tests/initial_errhandler checks it
    # in full when FTW_INITIAL_ERRHANDLER is set).
    out=$(TMPDIR=$work/tmp timeout 60 "$top/scripts/ftwrun" -np 2 --mpi "$m" \
          --initial-errhandler MPI_ERRORS_RETURN --launcher "$l" "${largs[@]}" \
          -- "$top/build/$m/tests/initial_errhandler" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | grep -c '^ok ')" -eq 5 ]
    ok $? "$m: --initial-errhandler MPI_ERRORS_RETURN: WORLD and SELF return errors, MPI_INFO_ENV names it ($rc)"
done
TMPDIR=$work/tmp timeout 20 "$top/scripts/ftwrun" -np 2 \
    --initial-errhandler mpi_errors_ignore -- true >/dev/null 2>&1
[ $? -eq 2 ]
ok $? "an unknown --initial-errhandler is a usage error (status 2)"
left=$(ls -d "$work/tmp"/ftwrun.* 2>/dev/null)
[ -z "$left" ]
ok $? "no status directory left behind (${left:-none})"

exit $((failed > 0))
