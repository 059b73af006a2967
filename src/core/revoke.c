/*
 * MPIX_Comm_revoke: a revocation that reaches every live member of a
 * communicator, a process blocked in a receive included (see revoke.h).
 *
 * The notice is a header naming the communicator by its id on ftwrap's
 * control channel (ctl.h); the bell over the detector's socket only says
 * "look".  A notice for a communicator not made here yet waits on the
 * channel until it is.  Every process that learns of a revocation sends the notice on
 * to all other live members (reliable broadcast by flooding): if the
 * revoker dies half-way, whoever got the notice completes the job, and a
 * process that got no bell learns of the revoker's death (a failure) and
 * looks then.
 */
#include <pthread.h>
#include <stdlib.h>

#include "detect/detect.h"
#include "core/comm.h"
#include "core/ctl.h"
#include "core/ft.h"
#include "core/lock.h"
#include "core/progress.h"
#include "core/raise.h"
#include "core/request.h"
#include "core/revoke.h"
#include "util/log.h"
#include "util/stats.h"

_Atomic int ftw_revoke_listening;
_Atomic uint32_t ftw_revoke_gen;
_Atomic uint32_t ftw_bells_seen;
_Atomic int ftw_revoked_count;

/* World rank of c's i-th member to notify, over both groups of an
 * intercommunicator (the remote group first, then the local one), or -1
 * for this process and members known failed. */
static int notify_target(const ftw_comm_t *c, int i)
{
    if (i < c->size)
        return c->is_inter || i != c->rank ?
               (ftw_comm_peer_failed(c, i) ? -1 : c->peer_world[i]) : -1;
    i -= c->size;
    return i == c->rank || ftw_detect_is_failed(c->local_world[i]) ? -1 :
           c->local_world[i];
}

/* Send the notice to every other live member, then ring their bells
 * (after the sends completed, so the notice is there when they look). */
static void revoke_flood(ftw_comm_t *c)
{
    int n = c->size + (c->is_inter ? c->nlocal : 0);
    MPI_Request *reqs = malloc(sizeof(*reqs) * (size_t)n);
    int *to = malloc(sizeof(*to) * (size_t)n);
    ftw_ctl_hdr_t notice = { .id = c->id };

    if (reqs == NULL || to == NULL) {
        ftw_error("out of memory to forward a revoke notice");
        free(reqs);
        free(to);
        return;
    }
    for (int i = 0; i < n; i++) {
        reqs[i] = MPI_REQUEST_NULL;
        to[i] = notify_target(c, i);
        if (to[i] >= 0)
            ftw_ctl_isend(c->chan, i, to[i], &notice, (int)sizeof(notice),
                          FTW_CTL_TAG_REVOKE, &reqs[i]);
    }
    for (int i = 0; i < n; i++)
        if (to[i] >= 0)
            ftw_ctl_send_finish(&reqs[i], to[i]);
    for (int i = 0; i < n; i++)
        if (to[i] >= 0)
            ftw_detect_bell(to[i]);
    free(to);
    free(reqs);
}

/* c is revoked from now on, here: every call on it leaves the fast path,
 * collectives are cut off, and the notice goes on to the others. */
static void revoke_mark(ftw_comm_t *c)
{
    if (c->revoked)
        return;
    c->revoked = 1;
    c->coll_active = 0;
    c->coll_gen++;
    if (ftw_revoked_count++ == 0)
        atomic_fetch_add_explicit(&ftw_noisy, 1, memory_order_relaxed);
    ftw_revoke_gen++;
    ftw_revoke_listening = 1;
    ftw_info("communicator revoked");
    revoke_flood(c);
}

/* Ids of the communicators freed here lately.  Every member forwards a
 * notice to every other, so copies keep arriving after the program freed
 * the communicator; one for an id in this ring is dropped, not parked for
 * a communicator that will never exist again (a program that revokes and
 * frees one communicator per iteration would park n - 2 notices per
 * iteration, and every later look at the channel walks them). */
#define FTW_FREED_IDS 1024

static pthread_mutex_t freed_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t freed_ids[FTW_FREED_IDS];
static unsigned freed_next;

static int freed_lately(uint64_t id)
{
    int found = 0;

    ftw_mt_lock(&freed_lock);
    for (unsigned i = 0; i < FTW_FREED_IDS && !found; i++)
        found = freed_ids[i] == id;
    ftw_mt_unlock(&freed_lock);
    return found;
}

/* A notice is taken once its communicator exists here, or is dropped
 * when it existed and was freed. */
static int revoke_match(const ftw_ctl_hdr_t *hdr, void *arg)
{
    (void)arg;
    return ftw_comm_by_id(hdr->id) != NULL || freed_lately(hdr->id);
}

static int id_match(const ftw_ctl_hdr_t *hdr, void *arg)
{
    return hdr->id == *(const uint64_t *)arg;
}

void ftw_revoke_comm_freed(uint64_t id)
{
    ftw_ctl_msg_t *m;

    if (id == 0)
        return;
    ftw_mt_lock(&freed_lock);
    freed_ids[freed_next++ % FTW_FREED_IDS] = id;
    ftw_mt_unlock(&freed_lock);
    while ((m = ftw_ctl_take_parked(FTW_CTL_TAG_REVOKE, id_match, &id)) !=
           NULL)
        free(m);
}

/* Take every notice waiting on the channel for a communicator made here;
 * how many. */
static int revoke_look(void)
{
    ftw_ctl_msg_t *m;
    int n = 0;

    while ((m = ftw_ctl_take(FTW_CTL_TAG_REVOKE, revoke_match, NULL)) !=
           NULL) {
        ftw_comm_t *c = ftw_comm_by_id(m->u.hdr.id);

        free(m);
        if (c != NULL)
            revoke_mark(c);
        n++;
    }
    return n;
}

/* Seconds a bell that found no notice keeps every check looking before
 * it counts as answered: the notice was sent before the bell, but the MPI
 * may need turns of its progress to match it (Open MPI), and a program
 * that only makes calls refused at once (a loop of collectives on a
 * communicator with a failure) gives ftwrap no idle turn to look in. */
#define FTW_BELL_LOOK_TIME 1.0

void ftw_revoke_poll(void)
{
    static FTW_TLS int busy;
    static _Atomic double unanswered_since;     /* any thread polls */

    int done = 0;
    uint32_t bells;

    if (busy || PMPI_Finalized(&done) != MPI_SUCCESS || done)
        return;
    busy = 1;
    bells = atomic_load_explicit(&ftw_det_bells, memory_order_acquire);
    if (bells != 0)
        ftw_revoke_listening = 1;
    if (revoke_look() > 0 || bells == ftw_bells_seen) {
        ftw_bells_seen = bells;
        unanswered_since = 0;
    } else if (unanswered_since == 0) {
        unanswered_since = PMPI_Wtime();
    } else if (PMPI_Wtime() - unanswered_since > FTW_BELL_LOOK_TIME) {
        ftw_bells_seen = bells;
        unanswered_since = 0;
    }
    busy = 0;
}

void ftw_revoke_failure_seen(void)
{
    /* A revoker that died may have left notices without bells. */
    ftw_revoke_listening = 1;
    ftw_revoke_poll();
}

int ftw_comm_is_revoked_now(ftw_comm_t *c)
{
    ftw_revoke_check();
    return c->revoked;
}

/* The communicator of a ULFM call, or NULL after raising MPI_ERR_COMM:
 * revocation and agreement need the communicator's id. */
static ftw_comm_t *revoke_comm(MPI_Comm comm, const char *name)
{
    ftw_comm_t *c = comm == MPI_COMM_NULL ? NULL : ftw_comm_get(comm);

    if (c != NULL && c->id != 0)
        return c;
    ftw_error("%s: not possible on %s", name, c == NULL ? "MPI_COMM_NULL" :
              "a communicator ftwrap did not see made, or an "
              "intercommunicator between two jobs");
    return NULL;
}

int ftw_comm_revoke(MPI_Comm comm)
{
    ftw_comm_t *c;

    ftw_wrap_check();
    c = revoke_comm(comm, "MPIX_Comm_revoke");
    if (c == NULL)
        return ftw_raise(comm, MPI_ERR_COMM, "MPIX_Comm_revoke", -1);
    ftw_revoke_listening = 1;
    ftw_revoke_poll();
    ftw_stat_add(FTW_STAT_REVOKES, 1);
    revoke_mark(c);
    return MPI_SUCCESS;
}

FTW_EXPORT int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag)
{
    ftw_comm_t *c;

    ftw_wrap_check();
    if (flag == NULL)
        return ftw_raise(comm, MPI_ERR_ARG, "MPIX_Comm_is_revoked", -1);
    c = comm == MPI_COMM_NULL ? NULL : ftw_comm_get(comm);
    if (c == NULL)
        return ftw_raise(comm, MPI_ERR_COMM, "MPIX_Comm_is_revoked", -1);
    *flag = ftw_comm_is_revoked_now(c);
    return MPI_SUCCESS;
}
