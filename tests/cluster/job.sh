# Sourced by tests/cluster.sh, scripts/bench/hostlat and hbsoak: the ftwrun
# command line of a 4-rank job on two hosts of scripts/cluster-lab (2 ranks
# each; $cluster_hosts, default h1,h2), for each MPI and launcher.  Needs
# $top (the tree) and $agent (the lab's ssh-compatible agent, cluster-lab
# agent-path).
#
#   cluster_job MPI LAUNCHER REPORT PROGRAM [ARGS...]
#
# prints the command, quoted for bash -c inside the first host.
cluster_job() {
    local m=$1 l=$2 rep=$3 hosts=${cluster_hosts:-h1,h2}
    local ha=${hosts%,*} hb=${hosts#*,}
    shift 3
    local cmd=("$top/scripts/ftwrun" --mpi "$m" --launcher "$l" -np 4
               --report "$rep")
    case $l in
    mpirun)
        cmd+=(--host "$ha:2,$hb:2" --mca plm_rsh_agent "$agent"
              --mca btl self,vader,tcp --mca btl_tcp_if_include eth0
              --mca oob_tcp_if_include eth0) ;;
    mpiexec)
        cmd+=(-hosts "$ha:2,$hb:2" -launcher ssh -launcher-exec "$agent") ;;
    srun)
        cmd+=(-N2 --ntasks-per-node=2 -w "$ha,$hb") ;;
    esac
    cmd+=(-- "$@")
    if [ "$m" = openmpi ] && [ "$l" = srun ]; then
        cmd=(env OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=eth0
             "${cmd[@]}")
    fi
    printf '%q ' "${cmd[@]}"
}

# The launchers each MPI is run under in the lab, as "MPI LAUNCHER" lines.
cluster_combos() { # MPIS LAUNCHERS
    local m l
    for m in $1; do
        for l in $2; do
            case $m/$l in
            openmpi/mpirun | openmpi/srun | mpich/mpiexec | mpich/srun)
                echo "$m $l" ;;
            esac
        done
    done
}
