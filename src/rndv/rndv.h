/*
 * ftwrap's own rendezvous for large point-to-point messages: the
 * receiver pulls.
 *
 *   sender                                  receiver
 *   FIN receive posted (rndv comm)
 *   RTS: header, native, user's comm,  -->  the user's native receive
 *        dest and tag                       matches it (native order)
 *                                           pull over the transport
 *   FIN receive completes             <--   FIN (code) on the rndv comm
 *
 * The sender's request is the FIN receive, so every MPI completion call
 * drives it and a receiver's failure ends it like any receive.  The
 * receiver finishes a receive when its native request completes: a
 * payload of exactly FTW_RTS_SIZE bytes that starts with the job's
 * cookie is an RTS, and the pull happens then, in the completion call.
 *
 * With FTW_RNDV_FIRST the sender sends the message's first bytes right
 * after the RTS, as an eager message on the rendezvous communicator
 * (tag: the FIN tag + a shift above every FIN tag); the receiver takes
 * them while it pulls the rest.
 * A persistent send's round that no transport can expose goes the same
 * way whole (a fragment of all its bytes, the MPI's own send).
 *
 * States of one message: sender POSTED -> (FIN) DONE | TRUNCATED, or
 * ABORTED when the receiver fails; receiver MATCHED -> PULLING -> DONE
 * | TRUNCATED (prefix pulled, NACK sent), or ABORTED when the sender
 * fails (no FIN: nobody to tell).  Nothing is registered or pinned, so
 * abort releases the sender's packed copy (with its request) and, for
 * shm, the exposure of its range (ftw_rndv_send_end).  With shm the
 * sender takes part in the pull: it copies the fragments the receiver
 * asks for from inside its MPI calls (every wait loop's progress).
 */
#ifndef FTW_RNDV_RNDV_H
#define FTW_RNDV_RNDV_H

#include <limits.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "ftw_mpi_have.h"
#include "util/status.h"

/* The RTS header, what the receiver's native receive gets. */
typedef struct {
    uint64_t cookie[2];     /* the job's random cookie */
    uint64_t size;          /* bytes of the (packed) message */
    uint64_t addr;          /* where they are in the sender */
    int32_t pid;            /* the sender's pid */
    int32_t world;          /* the sender's world rank */
    int32_t fin_tag;        /* the tag its FIN receive waits for */
    int32_t xport;          /* ftw_xport_id_t to pull with */
    int32_t key;            /* the transport's key (shm: segment fd, verbs: rkey) */
    int32_t first;          /* bytes [0, first) follow as a fragment */
    int32_t pad[2];
} ftw_rts_t;

/* The header lands in the receive's own buffer, typed as the receive's
 * datatype: its size is a whole number of elements of every basic type
 * (up to the 32 bytes of MPI_C_LONG_DOUBLE_COMPLEX), or MPICH's unpacking
 * asserts on the partial element. */
_Static_assert(sizeof(ftw_rts_t) % 32 == 0,
               "the RTS must hold whole elements of every basic type");

#define FTW_RTS_SIZE ((int)sizeof(ftw_rts_t))

/* What a FIN says. */
typedef enum {
    FTW_FIN_DONE = 0,       /* pulled */
    FTW_FIN_TRUNCATED = 1,  /* the receive was too small: prefix pulled */
    FTW_FIN_FAILED = 2,     /* the receiver could not pull */
} ftw_fin_code_t;

/* The MPI's nonblocking send (sync: synchronous), receive, persistent
 * receive and matched receive of count dt, whatever the count: the
 * large-count form when it does not fit an int.  Only the large-count
 * wrappers pass such counts, and only an MPI that has those forms has
 * them; MPI_ERR_COUNT elsewhere. */
static inline int ftw_isend_any(int sync, const void *buf, MPI_Count count,
                                MPI_Datatype dt, int dest, int tag,
                                MPI_Comm comm, MPI_Request *req)
{
#ifdef FTW_HAVE_MPI_ISEND_C
    if (count > INT_MAX)
        return (sync ? PMPI_Issend_c : PMPI_Isend_c)(buf, count, dt, dest,
                                                     tag, comm, req);
#else
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
#endif
    return (sync ? PMPI_Issend : PMPI_Isend)(buf, (int)count, dt, dest, tag,
                                             comm, req);
}

static inline int ftw_irecv_any(void *buf, MPI_Count count, MPI_Datatype dt,
                                int source, int tag, MPI_Comm comm,
                                MPI_Request *req)
{
#ifdef FTW_HAVE_MPI_IRECV_C
    if (count > INT_MAX)
        return PMPI_Irecv_c(buf, count, dt, source, tag, comm, req);
#else
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
#endif
    return PMPI_Irecv(buf, (int)count, dt, source, tag, comm, req);
}

static inline int ftw_recv_init_any(void *buf, MPI_Count count,
                                    MPI_Datatype dt, int source, int tag,
                                    MPI_Comm comm, MPI_Request *req)
{
#ifdef FTW_HAVE_MPI_RECV_INIT_C
    if (count > INT_MAX)
        return PMPI_Recv_init_c(buf, count, dt, source, tag, comm, req);
#else
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
#endif
    return PMPI_Recv_init(buf, (int)count, dt, source, tag, comm, req);
}

static inline int ftw_imrecv_any(void *buf, MPI_Count count, MPI_Datatype dt,
                                 MPI_Message *msg, MPI_Request *req)
{
#ifdef FTW_HAVE_MPI_IMRECV_C
    if (count > INT_MAX)
        return PMPI_Imrecv_c(buf, count, dt, msg, req);
#else
    if (count > INT_MAX)
        return MPI_ERR_COUNT;
#endif
    return PMPI_Imrecv(buf, (int)count, dt, msg, req);
}

/* Smallest message that goes through the rendezvous; 0: off. */
extern size_t ftw_rndv_min;

/* 1 while ftw_rndv_min is (the rendezvous runs): its progress step's
 * gate (core/progress.h). */
extern _Atomic int ftw_rndv_on;

/* Collective over MPI_COMM_WORLD (in MPI_Init): the cookie, the
 * rendezvous communicator and the transports' peer table. */
ftw_status_t ftw_rndv_init(void);
void ftw_rndv_fini(void);

/* A rendezvous send in flight: the FIN receive and the memory it owns
 * (the FIN word, then the packed copy of a non-contiguous message). */
typedef struct {
    MPI_Request fin_req;
    void *owned;
} ftw_rndv_send_t;

/* Start a rendezvous send of count dt at buf (size bytes) to world rank
 * world, which is rank npeer of native; the RTS carries tag.
 * FTW_ST_UNSUPPORTED: nothing was sent, the transport cannot take this
 * message now (verbs: its QP is being reconnected) or the data cannot be
 * packed (ftw_rndv_packable); send it natively. */
ftw_status_t ftw_rndv_send_start(const void *buf, MPI_Count count,
                                 MPI_Datatype dt, MPI_Count size, int world,
                                 int xport, int tag, MPI_Comm native,
                                 int npeer, ftw_rndv_send_t *s_p);

/* A persistent rendezvous send (MPI_Send_init and the like of a large
 * message): the block its request owns from init to free.  The FIN word
 * comes first, so the block is also what a one-shot send's owned block
 * is to ftw_rndv_fin_code and ftw_rndv_send_end; a non-contiguous
 * message's packed copy follows it (packed). */
typedef struct {
    uint64_t fin;           /* the FIN word of the round in flight */
    const void *buf;        /* the message: count dt at buf, size bytes */
    MPI_Count count, size;
    MPI_Datatype dt;        /* a duplicate if the data is packed */
    MPI_Aint lb;            /* contiguous: where the bytes start */
    char *packed;           /* non-contiguous: the copy, else NULL */
    int world;              /* the destination's world rank */
    int fin_tag;            /* its FIN receive's tag, for good */
    int tag;                /* the RTS's tag (the program's) */
    int kind;               /* ftw_op_kind_t of the program's call */
    int started;            /* a round began and its FIN has not come */
} ftw_rndv_psend_t;

/* Make a persistent send's block and its request: a persistent receive of
 * the FIN word (MPI_Recv_init on the rendezvous communicator) under a
 * FIN tag of its own; size bytes of count dt at buf to world rank world. */
ftw_status_t ftw_rndv_psend_new(const void *buf, MPI_Count count,
                                MPI_Datatype dt, MPI_Count size, int world,
                                ftw_rndv_psend_t **ps_p, MPI_Request *fin_req);

/* One round (MPI_Start): the data as it is now (packed again if not
 * contiguous) exposed through transport xport, the FIN receive fin_req
 * started, then the RTS sent to rank npeer of native.  When xport is
 * native or cannot expose the data now (a verbs QP being reconnected),
 * the round is pushed whole after the RTS, as its first fragment (at
 * most INT_MAX bytes; a larger round is refused). */
ftw_status_t ftw_rndv_psend_post(ftw_rndv_psend_t *ps, int xport,
                                 MPI_Comm native, int npeer,
                                 MPI_Request *fin_req);

/* Free a persistent send's block (its request is freed, or inactive and
 * about to be): exposure ended, FIN tag given back if its last round
 * ended with a FIN. */
void ftw_rndv_psend_free(ftw_rndv_psend_t *ps);

/* Free the persistent sends released while active (p2p_psend.c) whose
 * round ended; the number still waiting.  Part of ftw_rndv_progress. */
int ftw_rndv_psend_progress(void);

/* A send's owned block is about to be freed (the send ended, whatever
 * way): the transport stops letting the receiver read the data.  Cheap,
 * and a no-op for any other block. */
void ftw_rndv_send_end(const void *owned);

/* Free what a request's record owned (ftw_reqinfo_t.owned, with its
 * rndv bits): a send's block ends as ftw_rndv_send_end says; a receive
 * another thread is finishing early (pulling into its buffer) is waited
 * for first.  Any other block is just freed. */
void ftw_rndv_owned_free(unsigned rndv, void *owned, int pooled);

/* The code of the FIN an owned block (ftw_rndv_send_t.owned) got. */
ftw_fin_code_t ftw_rndv_fin_code(const void *owned);

/* Nonzero if the nbytes at hdr are an RTS of this job. */
int ftw_rndv_is_rts(const void *hdr, MPI_Count nbytes);

/* Receive the message an RTS announces into count dt at buf: pull what
 * fits, tell the sender.  *got_p: bytes placed.  FTW_ST_TRUNCATED when
 * the message was larger, FTW_ST_PEER_FAILED when the sender died. */
ftw_status_t ftw_rndv_recv(const ftw_rts_t *rts, void *buf, MPI_Count count,
                           MPI_Datatype dt, MPI_Count *got_p);

/* Tell the sender of an RTS that its message will not be taken (FIN,
 * failed): its request ends in error rather than wait.  Its fragment is
 * taken (ftw_rndv_drop). */
void ftw_rndv_refuse(const ftw_rts_t *rts);

/* The n bytes at hdr, a message received on a user's communicator, are
 * dropped unread (a drain, a refusal): if they are an RTS with a
 * fragment whose sender lives, receive the fragment and discard it, so
 * that it never matches the receive of a later message's fragment under
 * the same FIN tag. */
void ftw_rndv_drop(const void *hdr, MPI_Count n);

/* Send the n bytes at buf (malloc'd; taken, freed once sent) to this
 * process again, on the rendezvous communicator: a receive from rank
 * *rank_p with tag *tag_p on *comm_p gets them (a probed message handed
 * back to the MPI). */
ftw_status_t ftw_rndv_replay(void *buf, MPI_Count n, MPI_Comm *comm_p,
                             int *rank_p, int *tag_p);

/* Contiguity of count dt: nonzero if the data is one block, which then
 * starts *lb_p bytes from the buffer address. */
int ftw_rndv_contig(MPI_Count count, MPI_Datatype dt, MPI_Aint *lb_p);

/* Unpack n packed bytes at src into dt elements at buf, a partial last
 * element included (as a receive of a short message fills it).  An MPI
 * error code. */
int ftw_unpack_bytes(const char *src, MPI_Count n, void *buf,
                     MPI_Datatype dt);

/* MPI_Pack of any count and size (MPI_Pack_c where the MPI has it, else
 * int-sized calls over groups of whole elements) that also takes
 * MPI_BOTTOM with a type of absolute addresses (which MPICH refuses as a
 * null pointer). */
int ftw_pack(const void *buf, MPI_Count count, MPI_Datatype dt, void *out,
             MPI_Count outsize, MPI_Count *pos, MPI_Comm comm);

/* Can ftw_pack and ftw_unpack_bytes move elements of dt?  Not where the
 * MPI has no large-count pack and one element is larger than INT_MAX
 * bytes. */
int ftw_rndv_packable(MPI_Datatype dt);

/* Keep driving a request nobody waits for any more until the MPI lets
 * go of it, then free buf (which it may use until then). */
void ftw_rndv_loose_add(MPI_Request req, void *buf);

/* Complete what finished among ftwrap's own small sends and the
 * requests given to ftw_rndv_loose_add; serve shm receivers. */
void ftw_rndv_progress(void);

#endif
