/*
 * ftwrap's control channel: one duplicate of MPI_COMM_WORLD, made at
 * MPI_Init, carries every message ftwrap sends for itself (agreements,
 * revocation notices, the finalize barrier).  A message about a
 * communicator names it by the communicator's id (ftw_comm_t.id), which
 * every member computes alike without communication (comm.c), so a new
 * communicator costs ftwrap no native communicator and no context id of
 * its own.
 *
 * A communicator with members in other jobs (after MPI_Comm_spawn,
 * accept, connect or join) is out of that channel's reach: it gets a
 * channel of its own, a duplicate of it made when it is (ftw_ctl_chan_t),
 * shared by nothing else and read along with the job's.
 *
 * Messages are read by matched probes (thread safe); one that arrives for
 * an exchange this process has not reached yet (a faster peer's next
 * agreement, a communicator not made here yet) is parked until that
 * exchange asks for it.  Parked messages from processes known failed are
 * dropped once no exchange claims them.
 */
#ifndef FTW_FT_CTL_H
#define FTW_FT_CTL_H

#include <mpi.h>
#include <stdint.h>

/* Tags on the channel, one per kind of exchange. */
enum {
    FTW_CTL_TAG_ARRIVE = 1,     /* finalize barrier */
    FTW_CTL_TAG_RELEASE = 2,
    FTW_CTL_TAG_AGREE = 3,      /* agreements (agree.c) */
    FTW_CTL_TAG_REVOKE = 4,     /* revocation notices (revoke.c) */
    FTW_CTL_TAG_POST = 5,       /* MPI_Win_post done (win.c) */
};

/* What every message about a communicator starts with. */
typedef struct {
    uint64_t id;                /* the communicator's id */
    uint64_t seq;               /* the exchange on it (agreement number) */
    int32_t type;
    int32_t round;
} ftw_ctl_hdr_t;

typedef struct ftw_ctl_msg {
    struct ftw_ctl_msg *next;
    int tag;
    int from;                   /* world rank of the sender */
    int len;                    /* bytes of data */
    union {
        ftw_ctl_hdr_t hdr;
        unsigned char data[1];
    } u;
} ftw_ctl_msg_t;

extern MPI_Comm ftw_ctl_comm;

/* A communicator's own channel: a duplicate of it, whose rank r is the
 * process ids[r] (a world rank, or the id ftw_detect_foreign gave a
 * process of another job).  Counted references: the communicator's
 * record holds one, each agreement on it another. */
typedef struct ftw_ctl_chan ftw_ctl_chan_t;

/* Open one for comm, an intracommunicator of n members (collective over
 * comm: only where all of them are making it now); NULL if it could not
 * be made (said).  The caller holds the one reference. */
ftw_ctl_chan_t *ftw_ctl_chan_open(MPI_Comm comm, const int *ids, int n);
void ftw_ctl_chan_hold(ftw_ctl_chan_t *ch);
/* Drop a reference; the last frees the duplicate, and messages still
 * coming on it are never read. */
void ftw_ctl_chan_put(ftw_ctl_chan_t *ch);

/* Send len bytes with tag to the member of rank rank on ch, or, when ch is
 * NULL, to world rank id on the job's channel.  MPI_Isend's result. */
int ftw_ctl_isend(ftw_ctl_chan_t *ch, int rank, int id, const void *buf,
                  int len, int tag, MPI_Request *req);

/* Make the channel (collective over MPI_COMM_WORLD, at MPI_Init). */
int ftw_ctl_init(void);

/* Drop what is parked (at finalize; the native communicator goes with
 * the MPI). */
void ftw_ctl_fini(void);

/* The next message with tag whose header match() accepts: a parked one
 * first, else one that arrived; NULL if none is here now.  Messages of
 * the tag that match() refuses are parked.  The caller frees the result
 * with free(). */
typedef int (*ftw_ctl_match_fn_t)(const ftw_ctl_hdr_t *hdr, void *arg);
ftw_ctl_msg_t *ftw_ctl_take(int tag, ftw_ctl_match_fn_t match, void *arg);
/* As ftw_ctl_take, but only among the parked messages (no MPI call): for
 * exchanges that some other exchange's ftw_ctl_take keeps fed. */
ftw_ctl_msg_t *ftw_ctl_take_parked(int tag, ftw_ctl_match_fn_t match,
                                   void *arg);

/* Wait for a send on the channel to world rank peer; one to a process
 * that died meanwhile is given up (the MPI keeps the request). */
void ftw_ctl_send_finish(MPI_Request *req, int peer);

#endif
