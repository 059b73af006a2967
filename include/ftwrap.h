/*
 * ftwrap.h - public interface of ftwrap, process-failure semantics for
 * unmodified MPI programs on stock Open MPI and MPICH.
 *
 * Include after (or instead of) <mpi.h>.  Programs that only need the error
 * classes may use this header without linking -lftwrap: the classes are
 * constants, registered by the library inside MPI_Init in this order, and
 * MPI_Init fails loudly if the MPI hands out other values.
 */
#ifndef FTWRAP_H
#define FTWRAP_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTWRAP_VERSION_MAJOR 0
#define FTWRAP_VERSION_MINOR 1


/*
 * Error classes.  MPI_Error_class() and MPI_Error_string() work on them.
 *
 * FTW_ERR_PROC_FAIL_STOP       a process this operation depends on failed
 *                              (a receive or collective whose data the
 *                              dead process stopped sending may hold part
 *                              of it; nothing writes the buffer later)
 * FTW_ERR_ANY_SOURCE_DISABLED  a nonblocking MPI_ANY_SOURCE receive cannot
 *                              complete while a failure on its communicator
 *                              is not acknowledged; the request stays
 *                              pending (acknowledge or re-enable, then wait
 *                              again; or cancel it)
 * FTW_ERR_DRAINED              the request was cancelled by a drain
 * FTW_ERR_BUFFER_UNUSABLE      a failed transfer might still write the
 *                              receive buffer; it is quarantined
 * FTW_ERR_INTERRUPTED          interrupt mode: a new failure was seen
 *                              while the call blocked
 *
 * One class means "a process failed" whichever interface a program was
 * written for: FTW_ERR_PROC_FAIL_STOP is ULFM's MPIX_ERR_PROC_FAILED and
 * FTW_ERR_ANY_SOURCE_DISABLED is MPIX_ERR_PROC_FAILED_PENDING (mpi-ext.h),
 * the same value, returned as the class itself (not a code of it).  On
 * MPICH they are MPICH's own MPIX_ classes (101, 102; MPIX_ERR_REVOKED is
 * 103), so a program built against MPICH's mpi.h alone compares them
 * right.  On Open MPI 4.1, which has no ULFM, ftwrap registers them at
 * MPI_Init in this order, MPIX_ERR_REVOKED last; the others are
 * registered after MPICH's classes.  MPI_Init fails loudly if the MPI
 * hands out other values (a program that registered classes before
 * MPI_Init, or a library built for another MPI).
 *
 * Where ftwrap's interface and ULFM differ on wildcard receives: a
 * blocking MPI_Recv, MPI_Probe or MPI_Iprobe from MPI_ANY_SOURCE while a
 * failure is unacknowledged fails with FTW_ERR_PROC_FAIL_STOP, as in
 * ULFM (it has no request to leave pending); a nonblocking one is posted
 * and its wait or test reports FTW_ERR_ANY_SOURCE_DISABLED without
 * completing, also as in ULFM.  FTW_Comm_reenable_any_source and
 * MPIX_Comm_failure_ack / MPIX_Comm_ack_failed both acknowledge.
 */
#if defined(OPEN_MPI)
/* The first class MPI_Add_error_class returns in a fresh process. */
#define FTW_ERR_FIRST_              (MPI_ERR_LASTCODE + 1)
#define FTW_ERR_PROC_FAIL_STOP      (FTW_ERR_FIRST_ + 0)
#define FTW_ERR_ANY_SOURCE_DISABLED (FTW_ERR_FIRST_ + 1)
#define FTW_ERR_DRAINED             (FTW_ERR_FIRST_ + 2)
#define FTW_ERR_BUFFER_UNUSABLE     (FTW_ERR_FIRST_ + 3)
#define FTW_ERR_INTERRUPTED         (FTW_ERR_FIRST_ + 4)
#define FTW_ERR_REVOKED_            (FTW_ERR_FIRST_ + 5)
#define FTW_ERR_LAST_               FTW_ERR_REVOKED_
#elif defined(MPICH)
#define FTW_ERR_FIRST_              0x40000001
#define FTW_ERR_PROC_FAIL_STOP      (MPIX_ERR_PROC_FAILED)
#define FTW_ERR_ANY_SOURCE_DISABLED (MPIX_ERR_PROC_FAILED_PENDING)
#define FTW_ERR_DRAINED             (FTW_ERR_FIRST_ + 0)
#define FTW_ERR_BUFFER_UNUSABLE     (FTW_ERR_FIRST_ + 1)
#define FTW_ERR_INTERRUPTED         (FTW_ERR_FIRST_ + 2)
#define FTW_ERR_REVOKED_            (MPIX_ERR_REVOKED)
#define FTW_ERR_LAST_               FTW_ERR_INTERRUPTED
#else
#error "ftwrap supports Open MPI and MPICH"
#endif

/*
 * FTW_Initialized - whether ftwrap is active in this process.
 *
 * Local.  Sets *flag to 1 once MPI_Init has run under ftwrap.  Always
 * returns MPI_SUCCESS.  Needs -lftwrap at link time.
 */
int FTW_Initialized(int *flag);

/*
 * FTW_Stat_get - one of ftwrap's per-process counters, by the key
 * FTW_STATS=1 prints at MPI_Finalize (e.g. "det_fail_sent").
 *
 * Local; counts since MPI_Init, whether FTW_STATS is set or not.
 * MPI_ERR_ARG for an unknown key or a NULL argument.
 */
int FTW_Stat_get(const char *key, unsigned long long *value);

/*
 * FTW_Verbs_reread - for tests of the verbs transport: READ again, with
 * the key and address the sender's RTS gave, up to 4 KiB of the last
 * rendezvous message this process pulled by RDMA READ from world rank
 * world_rank.  Once that message's send has ended, the sender's memory
 * window is invalidated and the READ must be refused: *refused = 1 (the
 * QP then goes through the error state and is reconnected); 0 if it read.
 *
 * Local.  Only with FTW_VERBS_DEBUG=1 (else MPI_ERR_OTHER).  MPI_ERR_ARG
 * for a NULL refused, or when nothing was pulled from world_rank over
 * verbs; FTW_ERR_PROC_FAIL_STOP if world_rank failed.
 */
int FTW_Verbs_reread(int world_rank, int *refused);

/*
 * FTW_Comm_group_failed - the processes of comm known to have failed.
 *
 * Local; the answer is what this process knows now, and other processes
 * may know more or less.  *failed_group gets a group of comm's ranks (the
 * local group's, for an intercommunicator), in the order the failures
 * became known; free it with MPI_Group_free.
 * FTW_Comm_remote_group_failed - the same for the remote group of an
 * intercommunicator (MPI_ERR_COMM for an intracommunicator).
 * Errors: MPI_ERR_ARG (failed_group NULL), MPI_ERR_COMM.
 */
int FTW_Comm_group_failed(MPI_Comm comm, MPI_Group *failed_group);
int FTW_Comm_remote_group_failed(MPI_Comm comm, MPI_Group *failed_group);

/*
 * FTW_Comm_reenable_any_source - acknowledge the failures in comm and
 * allow MPI_ANY_SOURCE receives again.
 *
 * Local.  After a failure in comm, new wildcard receives and probes fail
 * at once with FTW_ERR_ANY_SOURCE_DISABLED, and pending nonblocking ones
 * report it from MPI_Wait/MPI_Test without completing, until this call.
 * *failed_group gets the failures acknowledged (as FTW_Comm_group_failed;
 * the remote group's, for an intercommunicator);
 * a failure that becomes known later disables wildcards again.
 * Errors: MPI_ERR_ARG, MPI_ERR_COMM.
 */
int FTW_Comm_reenable_any_source(MPI_Comm comm, MPI_Group *failed_group);

/*
 * FTW_Comm_validate - agree on the failed processes of comm and re-enable
 * its collectives.
 *
 * Collective over comm's surviving processes, fault tolerant: it
 * completes when processes (any of them) fail during it, and every
 * survivor gets the same *failed_group (comm's ranks; free it with
 * MPI_Group_free).  A process that fails during the call may or may not
 * be in it.  Afterwards collectives on comm run over the processes not in
 * *failed_group, with the application's rank numbers and buffer layouts:
 * a failed root is an error (FTW_ERR_PROC_FAIL_STOP) and the slots of
 * failed ranks in gather/scatter/alltoall buffers are left untouched.
 * Point-to-point traffic is not affected.  Communicator creation on comm
 * afterwards: MPI_Comm_split, MPI_Comm_split_type, MPI_Comm_create and
 * MPI_Comm_create_group work over the survivors, and so do
 * MPI_Intercomm_create and MPI_Intercomm_merge (numbered afresh); calls
 * that depend on rank numbers (dup, topologies) fail with
 * FTW_ERR_PROC_FAIL_STOP.
 * On an intercommunicator of one job the agreement spans both groups,
 * *failed_group holds the failed processes of both (as processes, not
 * ranks of one group), and the collectives afterwards run over both
 * groups' survivors with the remote group's rank numbers and layouts
 * (MPI_Reduce_scatter[_block] there, whose counts follow the local group,
 * fails with MPI_ERR_UNSUPPORTED_OPERATION once processes were excluded).
 * Errors: MPI_ERR_ARG, MPI_ERR_COMM (an intercommunicator between two
 * jobs, or a communicator ftwrap did not see made), MPI_ERR_NO_MEM.
 */
int FTW_Comm_validate(MPI_Comm comm, MPI_Group *failed_group);

/*
 * FTW_Icomm_validate - FTW_Comm_validate as a nonblocking call.
 *
 * *failed_group is written when *request completes (MPI_Wait/MPI_Test).
 */
int FTW_Icomm_validate(MPI_Comm comm, MPI_Group *failed_group,
                       MPI_Request *request);

/*
 * FTW_Comm_validate_multiple - FTW_Comm_validate on each of comms[0..count)
 * in order; *failed_group is the union of their failed groups, as a group
 * of MPI_COMM_WORLD's processes.
 */
int FTW_Comm_validate_multiple(int count, MPI_Comm comms[],
                               MPI_Group *failed_group);

/*
 * Windows.
 *
 * A failure of any process of a window (made through ftwrap with
 * MPI_Win_create, MPI_Win_allocate, MPI_Win_allocate_shared or
 * MPI_Win_create_dynamic, which are everywhere or nowhere) invalidates it:
 * from then on every RMA call (MPI_Put ... MPI_Compare_and_swap, the
 * request-based ones included) and every synchronisation on it (fence,
 * post/start/complete/wait/test, lock/unlock, lock_all/unlock_all, flush*)
 * fails with FTW_ERR_PROC_FAIL_STOP, raised on the window (whose default
 * handler is MPI_ERRORS_ARE_FATAL), and the window's memory is undefined
 * (a transfer cut by the failure may have written part of it).  A
 * synchronisation waiting for a process that dies fails instead of
 * hanging (fence, wait; a request-based operation's completion), except
 * where the MPI itself waits inside a call for a process that dies
 * during it (MPICH's lock, flush and unlock, and a fence all members
 * entered).
 * MPI_Win_free always releases the handle; after a failure it does not
 * wait for the others, and the MPI keeps the window's resources.
 *
 * FTW_Win_validate - collective over the window's surviving processes,
 * fault tolerant like FTW_Comm_validate: every survivor gets the same
 * *failed_group (the window's ranks; free it with MPI_Group_free), and
 * the window works again over the survivors, with the application's rank
 * numbers (a target that was excluded is an error) and the same memory.
 * A window of MPI_Win_create_dynamic cannot be made again (MPI_ERR_WIN
 * when processes were excluded).
 * FTW_Iwin_validate - the same as a nonblocking call: *failed_group is
 * set, and the window works again, when *request completes (wait or test
 * for it like any request; validates of any kind complete in the order
 * they started).
 * FTW_Win_group_failed - local: the window's processes known failed.
 * Errors: MPI_ERR_WIN (not a window made through ftwrap), MPI_ERR_ARG.
 */
int FTW_Win_validate(MPI_Win win, MPI_Group *failed_group);
int FTW_Iwin_validate(MPI_Win win, MPI_Group *failed_group,
                      MPI_Request *request);
int FTW_Win_group_failed(MPI_Win win, MPI_Group *failed_group);

/*
 * FTW_Win_set_failhandler / FTW_Win_get_failhandler - a window's failure
 * handler, as FTW_Comm_set_failhandler (below) for communicators: the
 * same registration order and modes; errhandler comes from
 * MPI_Win_create_errhandler and is called as fn(&win, &code).  Freeing
 * the window removes it.
 */
int FTW_Win_set_failhandler(MPI_Win win, MPI_Errhandler errhandler);
int FTW_Win_get_failhandler(MPI_Win win, MPI_Errhandler *errhandler);

/*
 * Files.
 *
 * Local file operations (independent reads and writes, seeks, queries)
 * are not affected by a peer's failure.  Collective ones (MPI_File_open,
 * close, set_view, read_all/write_all and their _at, ordered, split and
 * nonblocking forms, sync, set_size, preallocate, set_atomicity,
 * seek_shared, set_info) never hang on a process that died before the
 * call: after a new failure they fail with FTW_ERR_PROC_FAIL_STOP (raised
 * on the file) until FTW_File_validate.  MPI_File_close with a failure
 * does not close the file and returns the error: validate, then close.
 *
 * FTW_File_validate - collective over the file's surviving processes,
 * fault tolerant like FTW_Comm_validate: the same *failed_group (the
 * file's group's ranks) everywhere, and the file opened again over the
 * survivors: the same name and mode, the last view set again, each
 * process's individual file pointer kept (the shared one starts at 0).
 * FTW_File_group_failed - local: the file's processes known failed.
 * Errors: MPI_ERR_FILE (not a file opened through ftwrap), MPI_ERR_ARG.
 */
int FTW_File_validate(MPI_File fh, MPI_Group *failed_group);
int FTW_File_group_failed(MPI_File fh, MPI_Group *failed_group);

/*
 * FTW_File_set_failhandler / FTW_File_get_failhandler - a file's failure
 * handler, as FTW_Win_set_failhandler: errhandler comes from
 * MPI_File_create_errhandler and is called as fn(&fh, &code).  Closing
 * the file removes it.
 */
int FTW_File_set_failhandler(MPI_File fh, MPI_Errhandler errhandler);
int FTW_File_get_failhandler(MPI_File fh, MPI_Errhandler *errhandler);

/*
 * Failure handlers.
 *
 * FTW_Comm_set_failhandler(comm, errhandler) - collective: every process
 * of comm registers the same kind of handler, so the handlers run in the
 * same order everywhere (registration order).  errhandler comes from
 * MPI_Comm_create_errhandler (else MPI_ERR_ARG); FTW_FAILHANDLER_NULL
 * removes it.  ftwrap calls it as fn(&comm, &code) with code
 * FTW_ERR_PROC_FAIL_STOP from inside whatever MPI call the process is in
 * (including the wait loop of a blocking call) when it learns of new
 * failures; never nested: failures learned during a handler call the
 * handlers again afterwards.  Not inherited by new communicators.
 * FTW_Comm_get_failhandler gives the registered one, or
 * FTW_FAILHANDLER_NULL.
 *
 * FTW_Failhandler_set_mode, before the first handler is registered
 * (MPI_ERR_OTHER after), selects FTW_FAILHANDLER_MODE_ALL (default: every
 * handler for every new set of failures, no communication) or
 * FTW_FAILHANDLER_MODE_SUBSET (only handlers of communicators that
 * contain a newly failed process, after their members agree on the
 * failures, so every member calls it for the same failures).
 */
#define FTW_FAILHANDLER_NULL MPI_ERRHANDLER_NULL
#define FTW_FAILHANDLER_MODE_ALL 1
#define FTW_FAILHANDLER_MODE_SUBSET 2

int FTW_Comm_set_failhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int FTW_Comm_get_failhandler(MPI_Comm comm, MPI_Errhandler *errhandler);
int FTW_Failhandler_set_mode(int mode);
int FTW_Failhandler_get_mode(int *mode);

/*
 * FTW_Comm_drain_all - cut all point-to-point traffic in flight on comm.
 *
 * Collective over comm's surviving processes, fault tolerant, and allowed
 * inside a failure handler (the usual way a process blocked in a receive
 * joins a drain).  Every point-to-point request outstanding on comm at
 * the call ends: it completes normally if it already could, else with
 * FTW_ERR_DRAINED (a blocking call in progress returns it; a nonblocking
 * request reports it from its wait or test; a persistent request started
 * again reports it too).  A send to a live process ends once that
 * process took the message or dropped it (its drain drops what arrives
 * from before), so its buffer is free when the wait returns.  Messages in flight that nobody matched are
 * discarded, and nothing sent before the drain can be matched after it.
 * Processes the drain found failed are out of comm's point-to-point
 * traffic from then on (FTW_ERR_PROC_FAIL_STOP at once).
 * On an intercommunicator of one job the traffic moves to one of both
 * groups' survivors.
 * Errors: MPI_ERR_COMM (an intercommunicator between two jobs, or a
 * communicator ftwrap did not see made), MPI_ERR_NO_MEM.
 *
 * FTW_Icomm_drain_all - the same as a nonblocking call; the drain takes
 * effect when *request completes.
 *
 * FTW_Comm_drain_peer - the same between this process and peer only (both
 * call it): their outstanding requests with each other end with
 * FTW_ERR_DRAINED and each discards what the other sent before.  The tag
 * MPI_TAG_UB is reserved for it on comm.
 */
int FTW_Comm_drain_all(MPI_Comm comm);
int FTW_Icomm_drain_all(MPI_Comm comm, MPI_Request *request);
int FTW_Comm_drain_peer(MPI_Comm comm, int peer);

/*
 * FTW_Comm_set_interrupt - interrupt mode for comm (flag nonzero: on).
 *
 * Local.  With it on, a blocking point-to-point call on comm (send,
 * receive, probe, send-receive) returns FTW_ERR_INTERRUPTED when a
 * process of comm fails while it waits, like EINTR: a receive is
 * cancelled (or, had it matched already, completes normally); an
 * interrupted send may still be delivered.
 */
int FTW_Comm_set_interrupt(MPI_Comm comm, int flag);

/*
 * Receive-buffer quarantine.
 *
 * A receive whose native transfer might still write its buffer after the
 * call returned (its peer failed, or a drain cut it, and the MPI would not
 * let the request be cancelled; or a collective abandoned after a
 * failure) completes with FTW_ERR_BUFFER_UNUSABLE, and its buffer's byte
 * range is quarantined.
 *
 * Release: a range is released when nothing can write it any more: the
 * native request completed or was cancelled, or - for a receive from one
 * process on this host - that process has exited (pidfd) and this process
 * has since made FTW_QUARANTINE_SETTLE progress passes (the MPIs' shared
 * memory transports copy into the buffer on the receiving side, inside
 * this process's own MPI calls, so what a dead sender had queued is
 * consumed by then).  After the release the buffer no longer changes.
 * Ranges of collectives, and of receives from other hosts, are released
 * only when the native request ends.
 *
 * A later receive into an overlapping range, by FTW_QUARANTINE:
 *
 * error (default)  it fails at once with FTW_ERR_BUFFER_UNUSABLE.
 *
 * bounce  MPI_Recv, MPI_Irecv, MPI_Recv_init and MPI_Sendrecv (and
 *   MPI_Isendrecv) are posted into a private buffer of ftwrap's, so the
 *   message and a late write of the abandoned transfer never meet.  When
 *   the receive completes (MPI_Wait/Test and their forms, or the blocking
 *   call returns):
 *   - if no older quarantined range overlaps the buffer any more, the
 *     data is copied into it and the receive completes normally;
 *   - else the receive completes with FTW_ERR_BUFFER_UNUSABLE (MPI_Waitall
 *     and friends: MPI_ERR_IN_STATUS with it in the status), but the
 *     message is not lost: the status gives its MPI_SOURCE, MPI_TAG and
 *     count (MPI_Get_count), ftwrap keeps the data, quarantines the range
 *     and writes the data into it at the moment the older ranges are
 *     released, after the last write that could come from them.  When
 *     FTW_Buffer_quarantined reports the range free (or
 *     FTW_Buffer_wait_release returns released = 1) the data is there.
 *   So data handed back as valid is never changed afterwards.  A
 *   non-contiguous datatype is received packed (its pack size must fit an
 *   int) and unpacked; a contiguous one is copied.  A bounced receive
 *   whose own peer fails ends with FTW_ERR_PROC_FAIL_STOP, and the user's
 *   buffer is not quarantined (only ftwrap's buffer could still be
 *   written).  Other receives (MPI_Mrecv, MPI_Sendrecv_replace, ...) fail
 *   as in error mode.  Deferred data not delivered before MPI_Finalize is
 *   dropped.
 *
 * FTW_Buffer_quarantined - local: *flag = 1 if [buf, buf+len) overlaps a
 * quarantined range (it first gives pending releases a turn).
 * FTW_Buffer_wait_release - local: drive progress for up to timeout_s
 * seconds until the range is released; *released says whether it was.
 * Errors: MPI_ERR_ARG (a NULL output, a negative length or timeout).
 */
int FTW_Buffer_quarantined(const void *buf, MPI_Aint len, int *flag);
int FTW_Buffer_wait_release(const void *buf, MPI_Aint len, double timeout_s,
                            int *released);

#ifdef __cplusplus
}
#endif

#endif /* FTWRAP_H */
