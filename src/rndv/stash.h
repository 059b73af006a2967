/*
 * The probe stash: what makes probes report real sizes while the
 * rendezvous is on.
 *
 * A probe that meets a message of exactly FTW_RTS_SIZE bytes receives it
 * (matched probe) into an entry of the stash, which reports the size the
 * RTS announces (or 48 for a plain message of that size).  Receives,
 * probes and matched probes look at the stash before the MPI, taking the
 * oldest entry that matches; a receive or matched probe that takes one
 * gets it replayed: the header is sent to this process on the rendezvous
 * communicator and received from there, so its completion is an ordinary
 * rendezvous receive, with source and tag rewritten.
 *
 * Order: before the probed message, every older message from its source
 * (of tags the probe did not ask for, any size) is taken into the stash
 * too, in order, so that a source's entries are all older than its
 * messages still in the MPI; taking the oldest matching entry first then
 * keeps MPI's order for every source and tag selection (MPI_ANY_TAG
 * after a probe for one tag included), and across sources MPI promises
 * none.  An entry that is no RTS-sized message holds its bytes (data)
 * and is replayed whole.  Persistent receives look at the stash when
 * started, send-receives through ftw_rndv_sendrecv.
 */
#ifndef FTW_FT_STASH_H
#define FTW_FT_STASH_H

#include <mpi.h>

#include "op/op.h"
#include "rndv/rndv.h"

typedef struct ftw_stash {
    MPI_Comm comm;          /* the user's communicator */
    MPI_Comm native;        /* the one it came on: a receive takes it only
                             * there (after a drain, whose drop another
                             * thread's probe may have run behind, its
                             * source ranks and its epoch are another's) */
    int nsrc;               /* the source's rank where it came (native) */
    int usrc;               /* the source's rank in comm */
    int tag;
    MPI_Count size;         /* what probes report */
    char hdr[FTW_RTS_SIZE]; /* what came (an RTS-sized message) */
    void *data;             /* or, any other size, its n bytes */
    MPI_Count n;
    struct ftw_stash *next;
} ftw_stash_t;

extern _Atomic int ftw_stash_n; /* entries; 0 skips every look (a gate) */

/* One nonblocking look for op's source and tag, stash first: an
 * RTS-sized message of the MPI is taken into the stash.  *flag_p: found;
 * then st (not MPI_STATUS_IGNORE) describes it in native ranks.  A probe
 * passes msg_p NULL, and *e_p is NULL.  A matched probe passes msg_p:
 * what it found is matched in the same section (threads taking at once
 * each get another message, or none): an entry, taken out of the stash,
 * in *e_p (the caller's), or a message the MPI holds in *msg_p. */
int ftw_stash_look(ftw_op_t *op, int tag, MPI_Message *msg_p, int *flag_p,
                   MPI_Status *st, ftw_stash_t **e_p);

/* Around a receive's look at the stash and its native post (threads: a
 * probe does not take messages into the stash in between). */
void ftw_stash_post_begin(void);
void ftw_stash_post_end(void);

/* ftw_stash_post_begin for a fast path that posts natively only while
 * the stash is empty: 1 with the section entered and the stash empty,
 * 0 (section left) if a probe filled it meanwhile. */
int ftw_stash_post_begin_empty(void);

/* Remove and return the oldest entry a receive of op (source, tag) takes,
 * or NULL. */
ftw_stash_t *ftw_stash_take(const ftw_op_t *op, int tag);

/* Discard the entries of comm (from usrc, or all for MPI_ANY_SOURCE):
 * a drain cut them, or comm is freed.  tell: a sender of an RTS among
 * them hears that its message was not taken (FIN, failed). */
void ftw_stash_drop(MPI_Comm comm, int usrc, int tell);

/* Replay e (then freed) as a message to self: the receive for it goes to
 * rank *rank_p, tag *tag_p of *comm_p.  *src_p, *tag0_p: what its status
 * must say. */
int ftw_stash_replay(ftw_stash_t *e, MPI_Comm *comm_p, int *rank_p,
                     int *tag_p, int *src_p, int *tag0_p);

#endif
