/*
 * Collectives that never hang on a failed process.
 *
 * A failure in a communicator makes it collectively inactive: collectives
 * already posted complete (in error if they cannot finish), later ones
 * fail at once with FTW_ERR_PROC_FAIL_STOP, until FTW_Comm_validate.  After
 * a validate that excluded failed processes, collectives run on the
 * survivors' communicator (ftw_comm_t.coll) with the user's rank numbers
 * and buffer layouts kept: roots are translated (a failed root is an
 * error) and rank-indexed collectives become their v/w forms with
 * displacements that leave the failed ranks' slots untouched.  That
 * translation is ftw_xcoll_*() in coll_x.c.
 *
 * The generated wrappers drive a collective like this:
 *
 *   ftw_coll_begin()   inactive -> error; else the native communicator
 *   co.rotated ? ftw_xcoll_iX(&co, args..., &req) : PMPI_IX(args..., &req)
 *   ftw_coll_wait()    blocking: wait, give up if the communicator fails
 *   ftw_coll_posted()  nonblocking: remember the request
 */
#ifndef FTW_FT_COLL_H
#define FTW_FT_COLL_H

#include <mpi.h>

#include "core/comm.h"
#include "core/request.h"

/* Where a collective may write at this process, described by its
 * arguments (ftw_coll_recv) and worked out only when needed: a collective
 * abandoned on a failure quarantines that range. */
typedef enum {
    FTW_RSPAN_NONE,
    FTW_RSPAN_PLAIN,        /* count elements (times the size if scaled) */
    FTW_RSPAN_V,            /* up to the largest displs[i] + counts[i] */
    FTW_RSPAN_W,            /* the same in bytes, with per-rank types */
    FTW_RSPAN_MINE,         /* counts[rank] elements */
} ftw_rspan_kind_t;

typedef struct {
    int kind;
    int root;               /* >= 0: written at the root only; -1: at every
                             * rank; <= -2: at every rank but -root-2 */
    int scaled;             /* PLAIN: count times the communicator size */
    const void *buf;
    MPI_Count count;
    MPI_Datatype dt;
    const int *counts, *displs;
    const MPI_Datatype *dts;
} ftw_rspan_t;

static inline void ftw_coll_recv(ftw_rspan_t *r, int kind, int root,
                                 int scaled, const void *buf, MPI_Count count,
                                 MPI_Datatype dt, const int *counts,
                                 const int *displs, const MPI_Datatype *dts)
{
    *r = (ftw_rspan_t){ kind, root, scaled, buf, count, dt, counts, displs,
                        dts };
}

typedef struct {
    const char *name;       /* the MPI call, for messages */
    MPI_Comm comm;          /* the user's handle */
    ftw_comm_t *c;
    MPI_Comm native;        /* the communicator the collective runs on */
    int rotated;            /* arguments need translating (ftw_xcoll_*) */
    int rc;                 /* the error ftw_coll_begin decided */
    MPI_Request req;        /* a blocking collective's native request */
    uint32_t gen;           /* the communicator's coll_gen at the start */
    uint32_t cut_seq;       /* ftw_cut_seq at the start (buf/cut.h) */
    void *owned;            /* memory the native request uses until it
                             * completes (translated counts, packed
                             * buffers); freed with it */
    ftw_rspan_t rspan;      /* the receive buffer, for the quarantine */
    char *shield;           /* a blocking collective's private copy of its
                             * output span, or NULL (ftw_coll_out) */
    char *shield_lo;        /* the span in the user's memory */
    size_t shield_len;
    uint64_t child_id;      /* creation: the new communicator's id */
    int refused_unagreed;   /* creation: refused for a state the members
                             * have not agreed on (a failure, a revoke) */
    int same_members;       /* creation: the new communicator has the
                             * parent's members in its order (a dup) */
} ftw_coll_t;

/* Nonzero if the collective must fail at once (co->rc, already raised). */
int ftw_coll_begin(ftw_coll_t *co, const char *name, MPI_Comm comm);

/* After ftw_coll_recv: the output span checked against the quarantine
 * (nonzero, co->rc raised, if a failed transfer may still write it).  A
 * blocking collective whose error handler is not fatal runs over a
 * private copy of its output span (*buf_p is moved into it; copied in
 * first where input says the span holds more than output, or the span
 * has bytes the datatype skips; copied back once the MPI finishes): if a
 * failure cuts it, the MPI keeps writing that copy, never the program's
 * buffer, which is the program's again at once (a ULFM program reloads it
 * from a checkpoint, or reuses it). */
enum {
    FTW_OUT_ONLY,   /* the span holds only what the collective writes */
    FTW_OUT_KEEP,   /* it holds input, or bytes left as they are */
    FTW_OUT_WIDER   /* the input reaches beyond it: no private copy */
};
int ftw_coll_out(ftw_coll_t *co, void **buf_p, int blocking, int input);

/* Blocking: wait for co->req after a native post that returned rc. */
int ftw_coll_wait(ftw_coll_t *co, int rc);

/* Nonblocking: a post returned rc; remember *request for its wait. */
int ftw_coll_posted(ftw_coll_t *co, int rc, MPI_Request *request);

/* A large-count collective after failures were excluded: not supported
 * (raises MPI_ERR_UNSUPPORTED_OPERATION). */
int ftw_coll_unsupported(ftw_coll_t *co);

/* ---- blocking collectives the MPI's nonblocking form gets wrong --------
 * (coll_nb.c).  A blocking wrapper posts these instead of the native
 * nonblocking call on co->native (the generator's NB_ADJUST rule): each
 * adjusts the arguments where the MPI's nonblocking form would move data
 * differently from its blocking form (the blocks of duplicate Cartesian
 * neighbours), keeping what it allocates in co->owned.  Returns the
 * native post's error code. */
int ftw_coll_ineighbor_alltoall(ftw_coll_t *co, const void *sbuf,
                                int scount, MPI_Datatype stype, void *rbuf,
                                int rcount, MPI_Datatype rtype,
                                MPI_Request *req);
int ftw_coll_ineighbor_alltoallv(ftw_coll_t *co, const void *sbuf,
                                 const int scounts[], const int sdispls[],
                                 MPI_Datatype stype, void *rbuf,
                                 const int rcounts[], const int rdispls[],
                                 MPI_Datatype rtype, MPI_Request *req);
int ftw_coll_ineighbor_alltoallw(ftw_coll_t *co, const void *sbuf,
                                 const int scounts[], const MPI_Aint sdispls[],
                                 const MPI_Datatype stypes[], void *rbuf,
                                 const int rcounts[], const MPI_Aint rdispls[],
                                 const MPI_Datatype rtypes[],
                                 MPI_Request *req);

/* A blocking all-to-all turned nonblocking: counts of zero-size types
 * become 0 (types: one for all peers, or per_peer).  The blocking call
 * moves nothing for them either way, but Open MPI 4.1's nonblocking one
 * posts a receive for a nonzero count of a zero-size type while the
 * sender, whose count is 0, sends nothing, and never completes. */
void ftw_coll_zero_types(ftw_coll_t *co, const void *sendbuf,
                         const int **scounts, const MPI_Datatype *stypes,
                         const int **rcounts, const MPI_Datatype *rtypes,
                         int per_peer);

/* Communicator creation.  ftw_create_begin refuses an inactive parent,
 * and one whose failed ranks were excluded unless the call does not
 * depend on rank numbers (any_ranks: split, create, create_group), which
 * then runs on the survivors' communicator (co->native).  ftw_create_end
 * agrees (agree: over the parent's members) that every process created
 * the communicator, frees it everywhere otherwise, and tracks it with the
 * id the begin computed (comm.h).  collective = 0 (MPI_Comm_idup): the
 * new handle is not usable yet; it gets its id when ftwrap first looks at
 * it. */
int ftw_create_begin(ftw_coll_t *co, const char *name, MPI_Comm parent,
                     int any_ranks);
/* MPI_Comm_create_group: only the group's members call it, so only their
 * failures matter. */
int ftw_create_begin_group(ftw_coll_t *co, const char *name, MPI_Comm parent,
                           MPI_Group group, int tag);
/* MPI_Comm_dup (info: MPI_INFO_NULL) and MPI_Comm_dup_with_info on
 * co->native, as the MPI's nonblocking duplicate watched like a blocking
 * collective: a member's failure during it abandons it (graveyard) and
 * returns its error class, which ftw_create_end raises after the
 * agreement.  Intercommunicators, dup_with_info where the MPI has no
 * MPI_Comm_idup_with_info, and every duplicate on Open MPI (whose context
 * ids an abandoned one would hold up) take the blocking call, after a
 * watched MPI_Ibarrier (intracommunicators) that catches a member dead
 * before the call. */
int ftw_create_dup(ftw_coll_t *co, MPI_Info info, MPI_Comm *newcomm);
/* MPI_Comm_split of an intracommunicator on co->native, below
 * MPI_THREAD_MULTIPLE: the (color, key) pairs through the MPI's
 * nonblocking allgather, watched like a blocking collective (a member's
 * failure abandons it and returns its error class, as ftw_create_dup),
 * then MPI_Comm_create_group among the members of this process's color,
 * ordered by key, then rank.  A member dying after the gather still
 * blocks that last step.  Other cases take the MPI's own split. */
#define FTW_SPLIT_TAG 30005
int ftw_create_split(ftw_coll_t *co, int color, int key, MPI_Comm *newcomm);
int ftw_create_end(ftw_coll_t *co, int rc, MPI_Comm *newcomm, int agree,
                   int collective);
/* A creation ftw_create_begin refused: co->rc, after the creation's
 * agreement (agree: the call runs one) where the refusal came from a
 * failure or revocation the other members may not know of yet, so every
 * member takes part in the same agreements on the parent. */
int ftw_create_refused(ftw_coll_t *co, int agree);

/* A blocking creation the MPI runs over all of the parent's members and
 * that has no nonblocking form to watch (MPI_Comm_spawn, its _multiple,
 * MPI_Comm_accept, MPI_Comm_connect): before the MPI's call the members
 * agree that none failed and none refused (refused: ftw_create_begin's
 * answer), so a failure known to any of them ends the call on all of
 * them with an error instead of hanging those already in the MPI's call.
 * 0 to go on; 1 when refused, co->rc holding the error.  A member that
 * dies after the agreement still hangs the others.  refused may also be
 * FTW_GATE_BAD_ARGS (ftw_spawn_bad): the others fail with the same
 * class. */
#define FTW_GATE_BAD_ARGS 2
int ftw_create_gate(ftw_coll_t *co, int refused);

/* At the root of a spawn: FTW_GATE_BAD_ARGS (co->rc raised) if a command
 * to start is NULL or empty (Open MPI 4.1 waits for ever to start one),
 * else 0.  commands: MPI_Comm_spawn_multiple's count commands, or NULL
 * for MPI_Comm_spawn's one command. */
int ftw_spawn_bad(ftw_coll_t *co, int count, char **commands,
                  const char *command, int root);

/* A creation the gate refused: *newcomm is MPI_COMM_NULL and, at a
 * spawn's root, each of the count commands' maxprocs error codes is
 * co->rc, which it returns. */
int ftw_gate_refused(ftw_coll_t *co, MPI_Comm *newcomm, int root,
                     int count, const int *maxprocs, int *errcodes);

/* A communicator made without a parent (MPI_Comm_join, ...): tracked, with
 * an id its members agree on when all of them are making it now. */
int ftw_create_orphan(int rc, MPI_Comm *newcomm, int collective);

/* MPI_Barrier as ftwrap's own step (name: the call it is part of, for
 * messages): over comm's survivors after a validate, ending in an error
 * raised on comm when a member fails, never in a hang. */
int ftw_barrier_watched(MPI_Comm comm, const char *name);

/* MPI_Comm_disconnect: a watched barrier over *comm first, so that a
 * member that died (or never disconnects before it dies) is an error, not
 * a hang.  After the barrier, the MPI's disconnect; when a failure cut the
 * barrier (raised on *comm while it is still valid), the handle is freed
 * here without waiting for the others and the error returned. */
int ftw_comm_disconnect(MPI_Comm *comm);

/* Survivor rank in co->native of comm rank r, or -1 if r was excluded. */
static inline int ftw_coll_rank(const ftw_coll_t *co, int r)
{
    return r >= 0 && r < co->c->size ? co->c->surv_of[r] : -1;
}

/* r as a rank of co->native: translated when that holds the survivors. */
static inline int ftw_coll_rank_of(const ftw_coll_t *co, int r)
{
    return co->c != NULL && co->rotated ? ftw_coll_rank(co, r) : r;
}

/* ---- translated collectives (coll_x.c) ----------------------------------
 * Each posts the nonblocking native collective on co->native for the
 * surviving ranks and stores any memory it must keep in co->owned.  Ranks
 * and buffer layouts are the user's (over co->c->size ranks).  Returns an
 * MPI error code; FTW_ERR_PROC_FAIL_STOP if a root was excluded. */
int ftw_xcoll_ibarrier(ftw_coll_t *co, MPI_Request *req);
int ftw_xcoll_ibcast(ftw_coll_t *co, void *buf, int count, MPI_Datatype dt,
                     int root, MPI_Request *req);
int ftw_xcoll_ireduce(ftw_coll_t *co, const void *sbuf, void *rbuf,
                      int count, MPI_Datatype dt, MPI_Op op, int root,
                      MPI_Request *req);
int ftw_xcoll_iallreduce(ftw_coll_t *co, const void *sbuf, void *rbuf,
                         int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Request *req);
int ftw_xcoll_iscan(ftw_coll_t *co, const void *sbuf, void *rbuf, int count,
                    MPI_Datatype dt, MPI_Op op, MPI_Request *req);
int ftw_xcoll_iexscan(ftw_coll_t *co, const void *sbuf, void *rbuf,
                      int count, MPI_Datatype dt, MPI_Op op,
                      MPI_Request *req);
int ftw_xcoll_igather(ftw_coll_t *co, const void *sbuf, int scount,
                      MPI_Datatype stype, void *rbuf, int rcount,
                      MPI_Datatype rtype, int root, MPI_Request *req);
int ftw_xcoll_igatherv(ftw_coll_t *co, const void *sbuf, int scount,
                       MPI_Datatype stype, void *rbuf, const int rcounts[],
                       const int displs[], MPI_Datatype rtype, int root,
                       MPI_Request *req);
int ftw_xcoll_iscatter(ftw_coll_t *co, const void *sbuf, int scount,
                       MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, int root, MPI_Request *req);
int ftw_xcoll_iscatterv(ftw_coll_t *co, const void *sbuf,
                        const int scounts[], const int displs[],
                        MPI_Datatype stype, void *rbuf, int rcount,
                        MPI_Datatype rtype, int root, MPI_Request *req);
int ftw_xcoll_iallgather(ftw_coll_t *co, const void *sbuf, int scount,
                         MPI_Datatype stype, void *rbuf, int rcount,
                         MPI_Datatype rtype, MPI_Request *req);
int ftw_xcoll_iallgatherv(ftw_coll_t *co, const void *sbuf, int scount,
                          MPI_Datatype stype, void *rbuf,
                          const int rcounts[], const int displs[],
                          MPI_Datatype rtype, MPI_Request *req);
int ftw_xcoll_ialltoall(ftw_coll_t *co, const void *sbuf, int scount,
                        MPI_Datatype stype, void *rbuf, int rcount,
                        MPI_Datatype rtype, MPI_Request *req);
int ftw_xcoll_ialltoallv(ftw_coll_t *co, const void *sbuf,
                         const int scounts[], const int sdispls[],
                         MPI_Datatype stype, void *rbuf, const int rcounts[],
                         const int rdispls[], MPI_Datatype rtype,
                         MPI_Request *req);
int ftw_xcoll_ialltoallw(ftw_coll_t *co, const void *sbuf,
                         const int scounts[], const int sdispls[],
                         const MPI_Datatype stypes[], void *rbuf,
                         const int rcounts[], const int rdispls[],
                         const MPI_Datatype rtypes[], MPI_Request *req);
int ftw_xcoll_ireduce_scatter(ftw_coll_t *co, const void *sbuf, void *rbuf,
                              const int rcounts[], MPI_Datatype dt,
                              MPI_Op op, MPI_Request *req);
int ftw_xcoll_ireduce_scatter_block(ftw_coll_t *co, const void *sbuf,
                                    void *rbuf, int rcount, MPI_Datatype dt,
                                    MPI_Op op, MPI_Request *req);

#endif
