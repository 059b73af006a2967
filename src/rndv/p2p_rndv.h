/*
 * The rendezvous (src/rndv) as the point-to-point wrappers use it.
 * While FTW_RNDV_THRESHOLD is 0 the wrappers never call these: the test
 * is one compare of ftw_rndv_min.
 */
#ifndef FTW_FT_P2P_RNDV_H
#define FTW_FT_P2P_RNDV_H

#include <mpi.h>

#include "op/op.h"
#include "core/request.h"
#include "rndv/stash.h"
#include "rndv/rndv.h"

/* A send of count dt of at least ftw_rndv_min bytes (the caller checked):
 * rendezvous to a peer a transport reaches, else the MPI's own send.
 * kind: FTW_OP_SEND or FTW_OP_SSEND; request NULL: blocking. */
int ftw_rndv_send_op(const void *buf, MPI_Count count, MPI_Datatype dt,
                     int dest, int tag, MPI_Comm comm, int kind,
                     const char *name, MPI_Request *request);

/* A receive while the rendezvous is on: posted so that an RTS can land
 * (in the buffer, or in a scratch header when the buffer is smaller).
 * request NULL: blocking (status used); persistent: MPI_Recv_init. */
int ftw_rndv_recv_op(void *buf, MPI_Count count, MPI_Datatype dt,
                     int source, int tag, MPI_Comm comm, const char *name,
                     int persistent, MPI_Request *request,
                     MPI_Status *status);

/* Mark a receive whose native post the wrapper makes itself (matched
 * receives, send-receives) as one whose buffer may get an RTS. */
void ftw_op_rndv_recv(ftw_op_t *op);

/* A request with info->rndv set completed with *st (never
 * MPI_STATUS_IGNORE): pull an RTS's message, or read a FIN.  Returns the
 * code the request completes with; st describes the message. */
int ftw_rndv_finish(const ftw_reqinfo_t *info, MPI_Status *st);

/* The common completions ftw_rndv_finish makes without a pull or a
 * FIN (a plain request, a small message out of its scratch header, a
 * receive that got no RTS): made here, 1; 0 when ftw_rndv_finish must
 * run.  Nothing owned is released. */
int ftw_rndv_finish_quick(const ftw_reqinfo_t *info, const MPI_Status *st);

/* MPI_Finalize: free the split receives' types kept for reuse. */
void ftw_rndv_split_fini(void);

/* The same, raising an MPI error (truncation) on the request's
 * communicator, as the MPI would; ftwrap's own classes are left to the
 * caller, which raises them for every request alike. */
int ftw_rndv_finish_raise(const ftw_reqinfo_t *info, MPI_Status *st,
                          const char *name);

/* Finish the receives of the request table whose message came (pull
 * an RTS's data, send its FIN), keeping the outcome for their
 * completion: what lets a sender's wait end while its receiver waits for
 * something else, and MPI_Testall (all or none) go on. */
void ftw_rndv_progress_recvs(void);

/* A rendezvous send (req, its FIN receive) is being cut (a revocation,
 * a drain) while its receiver may be pulling the buffer: wait for the
 * FIN up to half a second while the receiver lives, finishing this
 * process's own receives meanwhile (two processes cutting their sends to
 * each other would otherwise both wait for pulls nobody makes).  1 if
 * the FIN came (*st its status). */
int ftw_rndv_send_settle(const ftw_reqinfo_t *info, MPI_Request *req,
                         MPI_Status *st);

/* MPI_Request_get_status found req complete: describe the message of a
 * receive finished early in st (the request stays). */
void ftw_rndv_peek(MPI_Request req, MPI_Status *st);

/* MPI_Request_free of an active receive that may get an RTS: keep
 * finishing it (pull, FIN) when its message comes, from progress; takes
 * info's owned memory.  0 if req is no such receive. */
int ftw_rndv_orphan(MPI_Request req, ftw_reqinfo_t *info);

/* The native persistent send a persistent rendezvous send falls back to
 * (PMPI_Send_init, PMPI_Ssend_init, PMPI_Rsend_init), and its large-count
 * form (NULL for a call that has an int count). */
typedef int (*ftw_psend_init_fn_t)(const void *, int, MPI_Datatype, int,
                                   int, MPI_Comm, MPI_Request *);
typedef int (*ftw_psend_init_c_fn_t)(const void *, MPI_Count, MPI_Datatype,
                                     int, int, MPI_Comm, MPI_Request *);

/* A persistent send of count dt of at least ftw_rndv_min bytes (the
 * caller checked): a persistent rendezvous send to a peer a transport
 * reaches (p2p_psend.c), else native_init's (native_init_c's when the
 * count does not fit an int).  kind: FTW_OP_SEND or FTW_OP_SSEND. */
int ftw_rndv_psend_init(const void *buf, MPI_Count count, MPI_Datatype dt,
                        int dest, int tag, MPI_Comm comm, int kind,
                        const char *name, MPI_Request *request,
                        ftw_psend_init_fn_t native_init,
                        ftw_psend_init_c_fn_t native_init_c);

/* MPI_Start of *req while the rendezvous is on: a persistent rendezvous
 * send starts its round, a persistent receive is prepared (and may be
 * served from the stash, ftw_rndv_started).  FTW_PENDING_CODE if the MPI
 * must still start *req, else the call's result. */
int ftw_rndv_start(MPI_Request *req, const char *name);

/* A persistent rendezvous send's request completed with *st: 1 if a
 * round ended with its FIN (read it), 0 for an inactive request's empty
 * status or a cancelled round. */
int ftw_rndv_psend_round(const ftw_reqinfo_t *info, const MPI_Status *st);

/* MPI_Request_free of a persistent rendezvous send: 1 if *req was one
 * (freed now, or once its round in flight ends), 0 otherwise. */
int ftw_rndv_psend_release(MPI_Request *req);

/* The world rank of rank peer of comm, or -1 if no transport can reach
 * it (intercommunicators, wildcard or null peers, processes of other
 * jobs, unknown communicators: those go native). */
int ftw_rndv_peer_world(MPI_Comm comm, int peer);

/* Whether this process has at least two rendezvous receives pending (a
 * window or a halo exchange receiving while it sends; one is a ping-
 * pong's reply), listed by their buffers' ranges. */
int ftw_rndv_both_ways(void);

/* A persistent request is being started (MPI_Start): 1 if a receive's
 * message was taken from the probes' stash instead, and the native
 * request must stay inactive. */
int ftw_rndv_started(MPI_Request req);

/* Nonzero while probes hold messages in the stash. */
static inline int ftw_rndv_stashed(void)
{
    return ftw_stash_n > 0;
}

/* MPI_Sendrecv and MPI_Sendrecv_replace (and their large-count forms)
 * while the stash holds messages or the send is large enough for the
 * rendezvous: the receive is ftwrap's own (it takes from the stash
 * first), the send MPI_Isend (MPI_Isend_c when its count does not fit an
 * int); both waited for. */
int ftw_rndv_sendrecv(const void *sbuf, MPI_Count scount, MPI_Datatype sdt,
                      int dest, int stag, void *rbuf, MPI_Count rcount,
                      MPI_Datatype rdt, int source, int rtag, MPI_Comm comm,
                      MPI_Status *status);
int ftw_rndv_sendrecv_replace(void *buf, MPI_Count count, MPI_Datatype dt,
                              int dest, int stag, int source, int rtag,
                              MPI_Comm comm, MPI_Status *status);

/* Nonzero if count elements of dt make at least ftw_rndv_min bytes. */
static inline int ftw_send_rndv(MPI_Count count, MPI_Datatype dt)
{
    MPI_Count size;

    if (ftw_likely(ftw_size_dt == dt && ftw_size_gen ==
                   atomic_load_explicit(&ftw_type_gen, memory_order_relaxed)))
        size = ftw_size_val;
    else if (ftw_type_size(dt, &size) != MPI_SUCCESS)
        return 0;   /* the MPI reports the bad datatype */
    return count * size >= (MPI_Count)ftw_rndv_min;
}

#endif
