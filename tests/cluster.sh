#!/usr/bin/env bash
# ftw-test: mode=script
# Jobs across hosts outlive a host: the cluster lab (scripts/cluster-lab,
# three hosts in namespaces, Slurm on them) runs tests/cluster/survive,
# 4 ranks on h1 and h2, through ftwrun under each launcher users run:
# mpirun (Open MPI), mpiexec (MPICH), srun --mpi=pmix (Open MPI) and
# srun --mpi=pmi2 (MPICH), and for each:
#
#   crash  h2 loses its link and every process at once (no FIN, no RST):
#          the survivors on h1 get the error, recover (validate, drain,
#          revoke, shrink, agree: survive.c checks each), and finish with
#          the exact sum over themselves; ftwrun ends within 60 s and reports
#          ranks 0 and 1 "exit:0", ranks 2 and 3 "node-lost";
#   kill   rank 3 alone is SIGKILLed on h2: ranks 0-2 finish with the sum
#          over themselves, the report says "3 signal:KILL" (Open MPI under
#          srun: Slurm's PMIx plugin would end the step when the rank's
#          PMIx connection closes unfinalized; ftw-supervise --hold-pmix
#          keeps it open until every rank is accounted for);
#   partition  h2 loses its link for 4 s, its processes alive: each side
#          holds the other failed; when the link heals, h2's ranks learn
#          that the side holding rank 0 went on without them and exit with
#          status 75, printing nothing; ranks 0 and 1 finish with the sum
#          over themselves;
#
# and after each, nothing of the job is left on the hosts still up (no
# process of it, no /dev/shm file).  The lab is torn down at the end and
# must leave nothing behind.  Run from the top of the tree as root, with
# MPIS="openmpi mpich"; skips (loudly) where namespaces cannot be made.
set -u
top=$(pwd)
lab=$top/scripts/cluster-lab
out=$top/build/cluster-lab
mpis=${MPIS:-openmpi mpich}
faults=${CLUSTER_FAULTS:-crash kill partition}   # a subset, by hand
launchers=${CLUSTER_LAUNCHERS:-mpirun mpiexec srun}
n=0 failed=0
todo=""
ok() { # STATUS MESSAGE
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2${todo:+ # TODO $todo}"
    elif [ -n "$todo" ]; then
        echo "not ok $n - $2 # TODO $todo"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
    fi
}
diag() { sed 's/^/# /' >&2; }

if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP the cluster lab needs root"
    exit 0
fi
mkdir -p "$out"
"$lab" down >/dev/null 2>&1
"$lab" up 3 >"$out/up.log" 2>&1
st=$?
if [ $st -eq 3 ]; then
    echo "1..0 # SKIP namespaces cannot be made here: $(tail -1 "$out/up.log")"
    exit 0
fi
trap '"$lab" down >/dev/null 2>&1' EXIT
if [ $st -ne 0 ] || ! grep -q "Slurm up" "$out/up.log"; then
    echo "1..1"
    echo "not ok 1 - cluster lab up (with Slurm: scripts/setup --cluster)"
    diag <"$out/up.log"
    exit 1
fi
agent=$("$lab" agent-path)
. "$top/tests/cluster/job.sh"

mapfile -t combos < <(cluster_combos "$mpis" "$launchers")
nfaults=$(echo $faults | wc -w)
echo "1..$((${#combos[@]} * nfaults * 4 + 1))"

for m in $mpis; do
    "mpicc.$m" -O2 -I"$top/include" "$top/tests/cluster/survive.c" \
        -o "$out/survive-$m" -L"$top/build/$m" -lftwrap \
        -Wl,-rpath,"$top/build/$m" || exit 1
done

# Processes of the job, and /dev/shm files, left on host $1.
leftovers() { # HOST
    "$lab" exec "$1" sh -c \
        'ps -eo args | grep -E "survive-|ftw-supervise|mpirun|hydra_pmi_proxy|orted" | grep -v grep; ls -A /dev/shm' \
        2>/dev/null
}

for c in "${combos[@]}"; do
    set -- $c
    m=$1 l=$2
    for fault in $faults; do
        todo=""
        # Long enough that h2's side still computes when the link heals.
        steps=300
        [ $fault = partition ] && steps=1500
        rep=$out/report.$m.$l.$fault
        log=$out/job.$m.$l.$fault
        rm -f "$rep"
        # MPICH 4.0.2 over UCX's TCP transport leaves a survivor stuck now
        # and then (about 1 job in 12 here, in the computation or its
        # MPI_Finalize, with or without a fault on the other host): such a
        # job is reported and run once more in a fresh lab.
        for try in 1 2; do
            rm -f "$rep"
            : >"$log"
            t0=$SECONDS
            (
                # The fault comes once every rank is past MPI_Init and its
                # first round (a host lost while the MPI still wires the job
                # up ends it in the MPI's own start-up, before ftwrap runs).
                for i in $(seq 300); do
                    [ "$(grep -c '^rank [0-9]: running' "$log")" -ge 4 ] && break
                    sleep 0.1
                done
                sleep 1
                if [ $fault = crash ]; then
                    "$lab" crash h2
                elif [ $fault = partition ]; then
                    "$lab" partition h2
                    sleep 4
                    "$lab" heal h2
                else
                    # The rank's process, not its supervisor (which records
                    # how the rank ended).
                    pid=$("$lab" exec h2 sh -c 'for p in $(pgrep -f "^'"$out"'/survive-"); do
                        tr "\\0" "\\n" </proc/$p/environ | grep -qxE "(OMPI_COMM_WORLD_RANK|PMI_RANK|SLURM_PROCID)=3" && echo $p; done' | head -1)
                    "$lab" kill h2 "$pid"
                fi
            ) >"$log.fault" 2>&1 &
            fpid=$!
            timeout 90 "$lab" exec h1 bash -c "$(cluster_job "$m" "$l" "$rep" "$out/survive-$m" $steps)" \
                >"$log" 2>&1
            rc=$?
            wait "$fpid"
            [ $rc -eq 124 ] && [ "$m" = mpich ] && [ $try -eq 1 ] || break
            echo "# $m $l $fault: the job hung (MPICH over UCX/TCP); once more in a fresh lab" >&2
            diag <"$log"
            "$lab" down >/dev/null 2>&1
            "$lab" up 3 >"$out/up.log" 2>&1 || diag <"$out/up.log"
        done
        dt=$((SECONDS - t0))
        if [ $fault = crash ]; then
            want=$(printf '0 exit:0\n1 exit:0\n2 node-lost\n3 node-lost')
            sums=$(printf 'rank 0: ok 3 2\nrank 1: ok 3 2')
        elif [ $fault = partition ]; then
            want=$(printf '0 exit:0\n1 exit:0\n2 exit:75\n3 exit:75')
            sums=$(printf 'rank 0: ok 3 2\nrank 1: ok 3 2')
        else
            want=$(printf '0 exit:0\n1 exit:0\n2 exit:0\n3 signal:KILL')
            sums=$(printf 'rank 0: ok 6 3\nrank 1: ok 6 3\nrank 2: ok 6 3')
        fi
        [ $rc -ne 124 ] && [ $dt -le 60 ]
        ok $? "$m $l $fault: ftwrun ended in ${dt}s (status $rc)"
        [ "$(cat "$rep" 2>/dev/null)" = "$want" ]
        ok $? "$m $l $fault: report $(tr '\n' ',' <"$rep" 2>/dev/null)"
        got=$(grep -E '^rank [0-9]+: (ok|WRONG)' "$log" | sort)
        [ "$got" = "$sums" ]
        ok $? "$m $l $fault: survivors' sums exact ($(echo $got))"
        [ $? -eq 0 ] || diag <"$log"
        left=""
        for h in h1 h3 $([ $fault != crash ] && echo h2); do
            x=$(leftovers $h)
            [ -n "$x" ] && left="$left $h: $(echo $x)"
        done
        [ -z "$left" ]
        ok $? "$m $l $fault: nothing of the job left on the hosts up${left:+ ($left)}"
        # A fresh lab for the next job.
        "$lab" down >/dev/null 2>&1
        "$lab" up 3 >"$out/up.log" 2>&1 || diag <"$out/up.log"
    done
done

"$lab" down >/dev/null 2>&1
trap - EXIT
left=$(ls -d /run/ftwrap-cluster-lab 2>/dev/null; ip link show br0 2>/dev/null;
       ps -eo args | grep -E "slurmd -N h|slurmctld|munged|cluster-lab-agent" |
       grep -v grep)
[ -z "$left" ]
ok $? "the lab is down and left nothing${left:+: $(echo $left)}"
exit $((failed > 0))
