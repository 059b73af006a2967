/*
 * Probes that never hang on a failed peer, and the table of matched
 * messages (MPI_Message -> communicator and source) that lets a matched
 * receive watch the process that sent it.
 */
#ifndef FTW_FT_PROBE_H
#define FTW_FT_PROBE_H

#include <mpi.h>

#include "op/op.h"

/* replay: NULL, or {1, source, tag} of a replayed stash entry, which
 * its receive's status must say. */
void ftw_msg_add(MPI_Message message, MPI_Comm comm, int source,
                 const int replay[3]);

/* Nonzero if the message has an entry. */
int ftw_msg_known(MPI_Message message);

/* A matched receive: comm and peer come from the message. */
void ftw_op_begin_msg(ftw_op_t *op, const char *name, MPI_Message message);

/* Remove a message's entry; leaves *comm_p, *source_p alone if unknown. */
void ftw_msg_take(MPI_Message message, MPI_Comm *comm_p, int *source_p,
                  int replay_p[3]);

int ftw_probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int ftw_iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status);
int ftw_mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
               MPI_Status *status);
int ftw_improbe(int source, int tag, MPI_Comm comm, int *flag,
                MPI_Message *message, MPI_Status *status);

#endif
