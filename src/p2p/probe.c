/* Probes that never hang on a failed peer. */
#include "p2p/probe.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

#include "ftwrap.h"
#include "core/comm.h"
#include "op/op.h"
#include "rndv/stash.h"
#include "core/revoke.h"
#include "util/log.h"

typedef struct {
    MPI_Message key;
    MPI_Comm comm;
    int source;
    int replay[3];          /* replayed stash entry: 1, source, tag */
    UT_hash_handle hh;
} msg_entry_t;

static msg_entry_t *msg_table;
static _Atomic int msg_n;           /* entries: a gate read unlocked */
static pthread_mutex_t msg_lock = PTHREAD_MUTEX_INITIALIZER;

void ftw_msg_add(MPI_Message message, MPI_Comm comm, int source,
                 const int replay[3])
{
    msg_entry_t *e;

    if (message == MPI_MESSAGE_NULL || message == MPI_MESSAGE_NO_PROC)
        return;
    e = malloc(sizeof(*e));
    if (e == NULL) {
        ftw_warn_sparse("out of memory: a matched message will not be "
                        "watched for its sender's failure");
        return;
    }
    e->key = message;
    e->comm = comm;
    e->source = source;
    e->replay[0] = replay != NULL;
    e->replay[1] = replay != NULL ? replay[1] : 0;
    e->replay[2] = replay != NULL ? replay[2] : 0;
    ftw_mt_lock(&msg_lock);
    HASH_ADD(hh, msg_table, key, sizeof(e->key), e);
    ftw_gate_add(msg_n, 1);
    ftw_mt_unlock(&msg_lock);
}

int ftw_msg_known(MPI_Message message)
{
    msg_entry_t *e;

    if (ftw_gate_get(msg_n) == 0)
        return 0;
    ftw_mt_lock(&msg_lock);
    HASH_FIND(hh, msg_table, &message, sizeof(message), e);
    ftw_mt_unlock(&msg_lock);
    return e != NULL;
}

void ftw_msg_take(MPI_Message message, MPI_Comm *comm_p, int *source_p,
                  int replay_p[3])
{
    msg_entry_t *e;

    if (ftw_gate_get(msg_n) == 0)
        return;
    ftw_mt_lock(&msg_lock);
    HASH_FIND(hh, msg_table, &message, sizeof(message), e);
    if (e != NULL) {
        HASH_DEL(msg_table, e);
        ftw_gate_add(msg_n, -1);
    }
    ftw_mt_unlock(&msg_lock);
    if (e == NULL)
        return;
    *comm_p = e->comm;
    *source_p = e->source;
    for (int i = 0; i < 3; i++)
        replay_p[i] = e->replay[i];
    free(e);
}

void ftw_op_begin_msg(ftw_op_t *op, const char *name, MPI_Message message)
{
    MPI_Comm comm = MPI_COMM_NULL;
    int source = MPI_PROC_NULL, rep[3] = {0, 0, 0};

    ftw_msg_take(message, &comm, &source, rep);
    ftw_op_begin(op, name, comm, source, FTW_OP_RECV);
    op->replay = rep[0];
    op->rsrc = rep[1];
    op->rtag = rep[2];
}

/* A probe that found nothing: has its source failed (or, for a wildcard,
 * are wildcards off)?  Returns FTW_PENDING_CODE or the error. */
static int probe_failcheck(ftw_op_t *op, int blocking, MPI_Status *status)
{
    ftw_comm_t *c = ftw_comm_get(op->info.comm);

    if (c == NULL)
        return FTW_PENDING_CODE;
    if (c->revoked) {
        ftw_status_fail(status, MPIX_ERR_REVOKED, op->info.peer);
        return MPIX_ERR_REVOKED;
    }
    if (ftw_req_drained(c, &op->info)) {
        ftw_status_fail(status, FTW_ERR_DRAINED, op->info.peer);
        return FTW_ERR_DRAINED;
    }
    if (op->info.peer >= 0 && ftw_comm_peer_failed(c, op->info.peer)) {
        ftw_status_fail(status, FTW_ERR_PROC_FAIL_STOP, op->info.peer);
        return FTW_ERR_PROC_FAIL_STOP;
    }
    if (blocking && c->interrupt &&
        ftw_comm_failed_since(c, op->info.epoch0)) {
        ftw_status_fail(status, FTW_ERR_INTERRUPTED, op->info.peer);
        return FTW_ERR_INTERRUPTED;
    }
    if (op->info.peer == MPI_ANY_SOURCE && ftw_comm_any_disabled(c)) {
        int code = blocking ? FTW_ERR_PROC_FAIL_STOP
                            : FTW_ERR_ANY_SOURCE_DISABLED;

        ftw_status_fail(status, code, MPI_ANY_SOURCE);
        return code;
    }
    return FTW_PENDING_CODE;
}

/* A stashed message matched by a matched probe: replayed to self, and
 * the handle of the replay (its status says the real source and tag). */
static int stash_message(ftw_op_t *op, ftw_stash_t *e, MPI_Message *message)
{
    MPI_Comm comm;
    MPI_Status st;
    int rank, tag, rep[3] = {1, 0, 0}, usrc = e->usrc, rc;

    rc = ftw_stash_replay(e, &comm, &rank, &tag, &rep[1], &rep[2]);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Mprobe(rank, tag, comm, message, &st);
    if (rc == MPI_SUCCESS)
        ftw_msg_add(*message, op->info.comm, usrc, rep);
    return rc;
}

/* One look while the rendezvous is on (message NULL: a probe), the
 * stash first.  status: in native ranks. */
static int look_stash(ftw_op_t *op, int tag, int *flag, MPI_Message *message,
                      MPI_Status *status)
{
    MPI_Status st;
    ftw_stash_t *e;
    int rc = ftw_stash_look(op, tag, message, flag, &st, &e);

    if (rc != MPI_SUCCESS || !*flag)
        return rc;
    if (message != NULL && e != NULL)
        rc = stash_message(op, e, message);
    if (status != MPI_STATUS_IGNORE)
        *status = st;
    return rc;
}

/* The common loop of Probe and Mprobe: Iprobe/Improbe until a message
 * comes or the source fails. */
static int probe_loop(ftw_op_t *op, int tag, MPI_Message *message,
                      MPI_Status *status)
{
    MPI_Comm comm = op->info.comm;
    ftw_poll_t p;

    ftw_poll_init(&p);
    for (;;) {
        int flag = 0, rc;

        if (ftw_rndv_min != 0)
            rc = look_stash(op, tag, &flag, message, status);
        else if (message != NULL)
            rc = PMPI_Improbe(op->npeer, tag, op->native, &flag, message,
                              status);
        else
            rc = PMPI_Iprobe(op->npeer, tag, op->native, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            ftw_status_to_user(op->info.p2p_user, op->info.p2p_n, status);
            return rc;
        }
        if (ftw_poll_changed(&p)) {
            if (ftw_p2p_moved)
                ftw_op_route(op);   /* a failure handler may have drained */
            rc = probe_failcheck(op, 1, status);
            if (rc != FTW_PENDING_CODE)
                return ftw_raise(comm, rc, op->name, op->info.peer);
        }
        ftw_poll_idle(&p);
    }
}

int ftw_probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    ftw_op_t op;

    ftw_op_begin(&op, "MPI_Probe", comm, source, FTW_OP_PROBE);
    if (ftw_op_refused(&op, status))
        return op.rc;
    return probe_loop(&op, tag, NULL, status);
}

int ftw_iprobe(int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *status)
{
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, "MPI_Iprobe", comm, source, FTW_OP_PROBE);
    if (ftw_op_refused(&op, status)) {
        *flag = 0;
        return op.rc;
    }
    if (ftw_rndv_min != 0) {
        ftw_rndv_progress();    /* a probe loop must not starve shm pulls */
        rc = look_stash(&op, tag, flag, NULL, status);
    } else
        rc = PMPI_Iprobe(op.npeer, tag, op.native, flag, status);
    if (rc == MPI_SUCCESS && *flag)
        ftw_status_to_user(op.info.p2p_user, op.info.p2p_n, status);
    return rc;
}

/* Remember who sent a matched message. */
static int mprobe_note(int rc, MPI_Comm comm, MPI_Message *message,
                       const MPI_Status *st, MPI_Status *status)
{
    if (rc == MPI_SUCCESS && !ftw_msg_known(*message))
        ftw_msg_add(*message, comm, st->MPI_SOURCE, NULL);
    if (status != MPI_STATUS_IGNORE)
        *status = *st;
    return rc;
}

int ftw_mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message,
               MPI_Status *status)
{
    MPI_Status st;
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, "MPI_Mprobe", comm, source, FTW_OP_PROBE);
    if (ftw_op_refused(&op, status))
        return op.rc;
    rc = probe_loop(&op, tag, message, &st);
    return mprobe_note(rc, comm, message, &st, status);
}

int ftw_improbe(int source, int tag, MPI_Comm comm, int *flag,
                MPI_Message *message, MPI_Status *status)
{
    MPI_Status st;
    ftw_op_t op;
    int rc;

    ftw_op_begin(&op, "MPI_Improbe", comm, source, FTW_OP_PROBE);
    if (ftw_op_refused(&op, status)) {
        *flag = 0;
        return op.rc;
    }
    if (ftw_rndv_min != 0) {
        ftw_rndv_progress();
        rc = look_stash(&op, tag, flag, message, &st);
    } else
        rc = PMPI_Improbe(op.npeer, tag, op.native, flag, message, &st);
    if (rc != MPI_SUCCESS || !*flag)
        return rc;
    ftw_status_to_user(op.info.p2p_user, op.info.p2p_n, &st);
    return mprobe_note(rc, comm, message, &st, status);
}
