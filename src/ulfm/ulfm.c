/*
 * The ULFM calls besides revocation (revoke.c): agree, shrink, the
 * acknowledgement of failures, and the texts of the error classes.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "ftw_mpi_have.h"
#include "detect/detect.h"
#include "recover/agree.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/ctl.h"
#include "core/ft.h"
#include "op/op.h"
#include "ulfm/ulfm.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"

#define TAG_SHRINK 30004

_Static_assert(sizeof(int) == 4, "the agreement carries a 4-byte flag");

/* ---- acknowledging failures --------------------------------------------- */

/* comm's record for a local ULFM call, or NULL (MPI_ERR_COMM raised). */
static ftw_comm_t *ulfm_comm(MPI_Comm comm, const char *name, int *rc_p)
{
    ftw_comm_t *c;

    ftw_wrap_check();
    c = comm == MPI_COMM_NULL ? NULL : ftw_comm_get(comm);
    if (c == NULL)
        *rc_p = ftw_raise(comm, MPI_ERR_COMM, name, -1);
    return c;
}

int ftw_comm_failure_ack(MPI_Comm comm)
{
    int rc;
    ftw_comm_t *c = ulfm_comm(comm, "MPIX_Comm_failure_ack", &rc);

    if (c == NULL)
        return rc;
    ftw_comm_refresh(c);
    c->nacked = c->nfailed;
    return MPI_SUCCESS;
}

/* The first k failures of c this process learned of, as a group. */
static int failed_first(ftw_comm_t *c, int k, MPI_Group *group_p)
{
    MPI_Group all;
    int n, *ranks;

    if (ftw_comm_failed_group(c, &all, &n) != FTW_OK)
        return MPI_ERR_NO_MEM;
    PMPI_Group_size(all, &n);
    k = k < n ? k : n;
    ranks = malloc(sizeof(int) * (size_t)(k > 0 ? k : 1));
    if (ranks == NULL) {
        PMPI_Group_free(&all);
        return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < k; i++)
        ranks[i] = i;
    PMPI_Group_incl(all, k, ranks, group_p);
    PMPI_Group_free(&all);
    free(ranks);
    return MPI_SUCCESS;
}

int ftw_comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp)
{
    int rc;
    ftw_comm_t *c = ulfm_comm(comm, "MPIX_Comm_failure_get_acked", &rc);

    if (c == NULL)
        return rc;
    if (failedgrp == NULL)
        return ftw_raise(comm, MPI_ERR_ARG, "MPIX_Comm_failure_get_acked",
                         -1);
    return failed_first(c, c->nacked, failedgrp);
}

FTW_EXPORT int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp)
{
    int rc;
    ftw_comm_t *c = ulfm_comm(comm, "MPIX_Comm_get_failed", &rc);

    if (c == NULL)
        return rc;
    if (failedgrp == NULL)
        return ftw_raise(comm, MPI_ERR_ARG, "MPIX_Comm_get_failed", -1);
    return failed_first(c, c->size, failedgrp);
}

FTW_EXPORT int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack,
                                    int *num_acked)
{
    int rc;
    ftw_comm_t *c = ulfm_comm(comm, "MPIX_Comm_ack_failed", &rc);

    if (c == NULL)
        return rc;
    if (num_acked == NULL || num_to_ack < 0)
        return ftw_raise(comm, MPI_ERR_ARG, "MPIX_Comm_ack_failed", -1);
    ftw_comm_refresh(c);
    if (num_to_ack > c->nfailed)
        num_to_ack = c->nfailed;
    if (num_to_ack > c->nacked)
        c->nacked = num_to_ack;
    *num_acked = c->nacked;
    return MPI_SUCCESS;
}

/* ---- agree -------------------------------------------------------------- */

/* This process's proposal: per rank, bit 0 if it is known failed here,
 * bit 1 if this process has not acknowledged its failure (live ones
 * included: a failure nobody knew is no error). */
static uint8_t *agree_proposal_of(ftw_comm_t *c, const int *world, int n)
{
    uint8_t *v = ftw_agree_malloc((size_t)n + 1);

    if (v == NULL)
        return NULL;
    ftw_comm_acked_of(c, world, n, v);
    for (int q = 0; q < n; q++)
        v[q] = (uint8_t)((ftw_detect_is_failed(world[q]) ? 1 : 0) |
                         (v[q] ? 0 : 2));
    return v;
}

static uint8_t *agree_proposal(ftw_comm_t *c)
{
    return agree_proposal_of(c, c->peer_world, c->size);
}

/* The decision: the flag, and MPIX_ERR_PROC_FAILED if a failed process
 * was not acknowledged by every participant. */
static int agree_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                        void *out)
{
    *(int *)out = flag;
    ftw_stat_add(FTW_STAT_AGREES, 1);
    for (int q = 0; q < ftw_agree_members(c); q++)
        if ((failed[q] & 3) == 3)
            return MPIX_ERR_PROC_FAILED;
    return MPI_SUCCESS;
}

/* Checks shared by agree and shrink, blocking or not: the record, a
 * decision array and (agree) the proposal. */
static int ulfm_collective(MPI_Comm comm, const void *out, ftw_comm_t **c_p,
                           uint8_t **failed_p, uint8_t **prop_p)
{
    int rc;

    if (out == NULL)
        return MPI_ERR_ARG;
    rc = ftw_agree_prepare(comm, c_p, failed_p);
    if (rc != MPI_SUCCESS || prop_p == NULL)
        return rc;
    *prop_p = agree_proposal(*c_p);
    if (*prop_p != NULL)
        return MPI_SUCCESS;
    free(*failed_p);
    return MPI_ERR_NO_MEM;
}

/* Agreement where the control channel cannot run one: on an
 * intercommunicator (ULFM's rule: each group gets the AND of the other
 * group's flags, which is what the MPI's MPI_Allreduce over an
 * intercommunicator computes) and on a communicator with members in
 * another job (a merge after MPI_Comm_spawn: the AND of all).  It runs as
 * a watched collective: a failure ftwrap learns of abandons it
 * (MPIX_ERR_PROC_FAILED here; others may see it complete), and ftwrap
 * sees no failure of another job's processes: not fault tolerant there
 * (README, known limits). */
static int agree_native(MPI_Comm comm, int *flag)
{
    ftw_coll_t co;
    int in = *flag, out = 0, rc;

    if (ftw_coll_begin(&co, "MPIX_Comm_agree", comm))
        return co.rc;
    rc = ftw_coll_wait(&co, PMPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_BAND,
                                            co.native, &co.req));
    if (rc == MPI_SUCCESS) {
        *flag = out;
        ftw_stat_add(FTW_STAT_AGREES, 1);
    }
    return rc;
}

/*
 * MPIX_Comm_agree on an intercommunicator of one job, ULFM's rule (each
 * group gets the AND of the other group's flags), uniform and fault
 * tolerant: two agreements over both groups, the first on the
 * flags of the group first in the member list (the other proposes all
 * ones, AND's neutral element), the second on the other group's.  Each
 * group takes the one on the other group's flags.
 */
static int agree_inter(ftw_comm_t *c, int *flag)
{
    int n = ftw_agree_members(c), lo, f1 = 0, f2 = 0, rc;
    int *world = ftw_agree_malloc(sizeof(int) * (size_t)(n + 1));
    uint8_t *failed = ftw_agree_malloc((size_t)n + 1), *prop = NULL;

    rc = world != NULL && failed != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS) {
        lo = ftw_agree_member_list(c, world) - c->rank;
        prop = agree_proposal_of(c, world, n);
        rc = prop != NULL ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    }
    if (rc == MPI_SUCCESS) {
        ftw_pending_finish_all();
        rc = ftw_agree(c, prop, lo == 0 ? *flag : ~0, failed, &f1);
    }
    if (rc == MPI_SUCCESS)
        rc = ftw_agree(c, prop, lo == 0 ? ~0 : *flag, failed, &f2);
    if (rc == MPI_SUCCESS)
        rc = agree_finish(c, failed, lo == 0 ? f2 : f1, flag);
    free(world);
    free(failed);
    free(prop);
    return rc == MPI_SUCCESS ? rc : ftw_raise(c->user, rc, "MPIX_Comm_agree",
                                              -1);
}

int ftw_comm_agree(MPI_Comm comm, int *flag)
{
    ftw_comm_t *c;
    uint8_t *failed, *prop;
    int rc, out = 0;

    c = comm == MPI_COMM_NULL || flag == NULL ? NULL : ftw_comm_get(comm);
    if (c != NULL && c->is_inter && c->id != 0 && c->chan == NULL) {
        ftw_wrap_check();
        return agree_inter(c, flag);
    }
    if (c != NULL && (c->is_inter || c->id == 0))
        return agree_native(comm, flag);
    rc = ulfm_collective(comm, flag, &c, &failed, &prop);
    if (rc != MPI_SUCCESS)
        return ftw_raise(comm, rc, "MPIX_Comm_agree", -1);
    ftw_pending_finish_all();
    rc = ftw_agree(c, prop, *flag, failed, &out);
    if (rc == MPI_SUCCESS)
        rc = agree_finish(c, failed, out, flag);
    free(prop);
    free(failed);
    return rc == MPI_SUCCESS ? rc : ftw_raise(comm, rc, "MPIX_Comm_agree", -1);
}

FTW_EXPORT int MPIX_Comm_iagree(MPI_Comm comm, int *flag,
                                MPI_Request *request)
{
    ftw_comm_t *c;
    uint8_t *failed, *prop;
    int rc;

    rc = ulfm_collective(comm, request ? (void *)flag : NULL, &c, &failed,
                         &prop);
    if (rc != MPI_SUCCESS)
        return ftw_raise(comm, rc, "MPIX_Comm_iagree", -1);
    rc = ftw_pending_start(c, agree_finish, failed, prop, *flag, flag,
                           request);
    free(prop);
    return rc == MPI_SUCCESS ? rc : ftw_raise(comm, rc, "MPIX_Comm_iagree",
                                              -1);
}

/* ---- shrink ------------------------------------------------------------- */

static int is_predefined_eh(MPI_Errhandler eh)
{
#ifdef MPI_ERRORS_ABORT
    if (eh == MPI_ERRORS_ABORT)
        return 1;
#endif
    return eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
}

/* A shrink's new communicator nc of c: c's error handler, tracked with
 * id (like: ftw_comm_track's), counted, handed out in *out. */
static void shrink_made(ftw_comm_t *c, MPI_Comm nc, uint64_t id,
                        const ftw_comm_t *like, void *out)
{
    MPI_Errhandler eh;

    if (PMPI_Comm_get_errhandler(c->user, &eh) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(nc, eh);
        if (!is_predefined_eh(eh))
            PMPI_Errhandler_free(&eh);
    }
    ftw_comm_track(nc, id, like);
    ftw_stat_add(FTW_STAT_SHRINKS, 1);
    *(MPI_Comm *)out = nc;
}

/* After the agreement: the communicator of the processes not in failed
 * (bit 0), with comm's error handler. */
static int shrink_finish(ftw_comm_t *c, const uint8_t *failed, int flag,
                         void *out)
{
    MPI_Comm nc;
    int rc;

    (void)flag;
    rc = ftw_comm_create_survivors(c, failed, 1, TAG_SHRINK, &nc);
    if (rc != MPI_SUCCESS)
        return rc;
    shrink_made(c, nc, ftw_comm_next_id(c), NULL, out);
    return MPI_SUCCESS;
}

/* Shrink where the control channel cannot run an agreement: on a
 * communicator with members in another job (a merge after a spawn).  The
 * members agree natively (agree_native) that none of them knows of a
 * failure, and the result is then a communicator of all of them.  A
 * failure known there is refused (the agreement is cut, or a member says
 * so): ftwrap cannot exclude processes of two jobs consistently. */
static int shrink_native(ftw_comm_t *c, MPI_Comm *newcomm)
{
    MPI_Group g;
    MPI_Comm nc = MPI_COMM_NULL;
    int ok, rc;

    ftw_comm_refresh(c);
    ok = c->nfailed == 0;
    rc = agree_native(c->user, &ok);
    if (rc != MPI_SUCCESS)
        return rc;      /* raised by the watched collective */
    if (!ok) {
        ftw_error("MPIX_Comm_shrink: a member of a communicator spanning "
                  "two jobs knows of a failure; ftwrap cannot exclude it "
                  "there");
        return ftw_raise(c->user, MPIX_ERR_PROC_FAILED, "MPIX_Comm_shrink",
                         -1);
    }
    if (PMPI_Comm_group(c->user, &g) != MPI_SUCCESS)
        return ftw_raise(c->user, MPI_ERR_INTERN, "MPIX_Comm_shrink", -1);
    rc = PMPI_Comm_create_group(c->user, g, TAG_SHRINK, &nc);
    PMPI_Group_free(&g);
    if (rc != MPI_SUCCESS)
        return rc;
    shrink_made(c, nc, 0, c, newcomm);
    return MPI_SUCCESS;
}

/* A tag for a shrink's native creations on the control channel, the same
 * on every member: from the communicator's id and the agreement's number
 * (above the channel's own tags). */
static int shrink_tag(const ftw_comm_t *c)
{
    uint64_t h = c->id * 0x9E3779B97F4A7C15ull + c->agree_seq;

    return 1000 + (int)((h ^ (h >> 29)) % 30000u);
}

/* Shrink of an intercommunicator (of one job): an agreement over both
 * groups on who failed, then each group's survivors make an
 * intracommunicator (MPI_Comm_create_group on the control channel, a
 * duplicate of MPI_COMM_WORLD: only they call it) and the two are joined
 * by MPI_Intercomm_create through the channel, between each group's
 * lowest survivor.  Only survivors take part in either call. */
static int shrink_inter(ftw_comm_t *c, MPI_Comm *newcomm)
{
    int n = ftw_agree_members(c);
    int *world = ftw_agree_malloc(sizeof(int) * (size_t)(n + 1));
    uint8_t *failed = ftw_agree_malloc((size_t)n + 1);
    int rc, flag, tag, lo;
    MPI_Comm nc = MPI_COMM_NULL;

    if (world == NULL || failed == NULL) {
        free(world);
        free(failed);
        return ftw_raise(c->user, MPI_ERR_NO_MEM, "MPIX_Comm_shrink", -1);
    }
    /* This process's group: [lo, lo + nlocal) of the member list. */
    lo = ftw_agree_member_list(c, world) - c->rank;
    tag = shrink_tag(c);
    ftw_pending_finish_all();
    rc = ftw_agree_settled(c, 1, 1, failed, &flag);
    if (rc == MPI_SUCCESS)
        rc = ftw_inter_survivors(failed, world, n, lo, c->nlocal, tag, &nc);
    free(world);
    free(failed);
    if (rc != MPI_SUCCESS)
        return ftw_raise(c->user, rc, "MPIX_Comm_shrink", -1);
    shrink_made(c, nc, ftw_comm_next_id(c), NULL, newcomm);
    return MPI_SUCCESS;
}

int ftw_comm_shrink(MPI_Comm comm, MPI_Comm *newcomm)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc, flag;

    c = comm == MPI_COMM_NULL || newcomm == NULL ? NULL : ftw_comm_get(comm);
    if (c != NULL && !c->is_inter && c->id == 0 && comm != MPI_COMM_SELF)
        return shrink_native(c, newcomm);
    if (c != NULL && c->is_inter && c->id != 0 && c->chan == NULL)
        return shrink_inter(c, newcomm);
    rc = ulfm_collective(comm, newcomm, &c, &failed, NULL);
    if (rc != MPI_SUCCESS)
        return ftw_raise(comm, rc, "MPIX_Comm_shrink", -1);
    ftw_pending_finish_all();
    rc = ftw_agree_settled(c, 1, 1, failed, &flag);
    if (rc == MPI_SUCCESS)
        rc = shrink_finish(c, failed, flag, newcomm);
    free(failed);
    return rc == MPI_SUCCESS ? rc : ftw_raise(comm, rc, "MPIX_Comm_shrink",
                                              -1);
}

FTW_EXPORT int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm,
                                 MPI_Request *request)
{
    ftw_comm_t *c;
    uint8_t *failed;
    int rc;

    rc = ulfm_collective(comm, request ? (void *)newcomm : NULL, &c,
                         &failed, NULL);
    if (rc == MPI_SUCCESS)
        rc = ftw_pending_start(c, shrink_finish, failed, NULL, 1, newcomm,
                               request);
    return rc == MPI_SUCCESS ? rc : ftw_raise(comm, rc, "MPIX_Comm_ishrink",
                                              -1);
}

/* ---- entry points the MPI's mpi.h does not declare ----------------------
 * (Open MPI 4.1's has none of them; MPICH 4.0's declares five, which the
 * generator wraps.) */

#ifndef FTW_HAVE_MPIX_COMM_REVOKE
FTW_EXPORT int MPIX_Comm_revoke(MPI_Comm comm)
{
    return ftw_comm_revoke(comm);
}
#endif

#ifndef FTW_HAVE_MPIX_COMM_SHRINK
FTW_EXPORT int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm)
{
    return ftw_comm_shrink(comm, newcomm);
}
#endif

#ifndef FTW_HAVE_MPIX_COMM_AGREE
FTW_EXPORT int MPIX_Comm_agree(MPI_Comm comm, int *flag)
{
    return ftw_comm_agree(comm, flag);
}
#endif

#ifndef FTW_HAVE_MPIX_COMM_FAILURE_ACK
FTW_EXPORT int MPIX_Comm_failure_ack(MPI_Comm comm)
{
    return ftw_comm_failure_ack(comm);
}
#endif

#ifndef FTW_HAVE_MPIX_COMM_FAILURE_GET_ACKED
FTW_EXPORT int MPIX_Comm_failure_get_acked(MPI_Comm comm,
                                           MPI_Group *failedgrp)
{
    return ftw_comm_failure_get_acked(comm, failedgrp);
}
#endif
