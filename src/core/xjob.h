/*
 * Processes of other jobs.  A communicator that joins two jobs
 * (MPI_Comm_spawn, MPI_Comm_accept/connect, MPI_Comm_join, and a spawned
 * process's parent communicator) is followed, on every member, by an
 * exchange over it: each process tells the other group its host and pid.
 * From then on the detector watches those processes (on this host) under
 * ids of their own (ftw_detect_foreign), and every communicator ftwrap
 * tracks maps them to those ids like members of this job to world ranks:
 * their failures are errors, never hangs, on every communicator holding
 * them, and a communicator of both jobs gets a control channel of its
 * own (ctl.h) for revocation and agreement.
 *
 * Both sides must run ftwrap: a side that makes no exchange leaves the
 * other waiting FTW_XJOB_WAIT seconds, which then warns and goes on
 * without watching it.
 */
#ifndef FTW_FT_XJOB_H
#define FTW_FT_XJOB_H

#include <mpi.h>

/* The exchange over inter, an intercommunicator joining this job to
 * another (collective over both groups); no-op for anything else.  name:
 * the call that made it, for messages. */
void ftw_xjob_exchange(MPI_Comm inter, const char *name);

/* For each i with out[i] < 0 (not of this job), the id of group's i-th
 * member if an exchange made it known. */
void ftw_xjob_translate(MPI_Group group, int n, int *out);

/* The info for MPI_Comm_spawn at its root (rank root of comm; elsewhere
 * user itself, which is not significant there).  A spawned process starts
 * from the launcher's environment, not its parent's: one whose parent got
 * ftwrap by LD_PRELOAD (ftwrun) would run without it, and the exchange
 * wait for it in vain.  On Open MPI, whose spawn takes "env" (lines
 * NAME=VALUE), the parent's LD_PRELOAD and FTW_* variables go first, the
 * program's own "env" after them (so it wins); MPICH's hydra passes the
 * whole environment on.  Release with ftw_spawn_info_free. */
MPI_Info ftw_spawn_info(MPI_Comm comm, int root, MPI_Info user);
void ftw_spawn_info_free(MPI_Info info, MPI_Info user);
/* The same for MPI_Comm_spawn_multiple's count infos: the array to pass,
 * released by ftw_spawn_infos_free. */
const MPI_Info *ftw_spawn_infos(MPI_Comm comm, int root, int count,
                                const MPI_Info user[]);
void ftw_spawn_infos_free(const MPI_Info *infos, int count,
                          const MPI_Info user[]);

/* Drop what the exchanges kept (at finalize). */
void ftw_xjob_fini(void);

#endif
