/*
 * killed_sender.h - the frame the tests of a rendezvous sender killed
 * mid-message share (rndv_fail_sender.c, rndv_first_frag_kill.c): rank 1
 * sends rank 0 a message and is killed on the way; rank 2, a bystander,
 * then sends rank 0 a rendezvous message and an eager one, which must
 * arrive intact, and its own verdict.  Include after "tap.h".
 */
#ifndef FTW_KILLED_SENDER_H
#define FTW_KILLED_SENDER_H

#include <stddef.h>

#define KS_TAG_VICTIM 1
#define KS_TAG_NEXT 2
#define KS_TAG_EAGER 3
#define KS_TAG_VERDICT 4
#define KS_EAGER 100
#define KS_SEED 22

/* MPI_Init, errors returned on MPI_COMM_WORLD, and this rank; the job
 * aborts if buf (the test's buffer) could not be had. */
static inline int ks_start(int *argc, char ***argv, const void *buf)
{
    int rank;

    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    return rank;
}

/* Rank 1: send len bytes of buf (seed 11) to rank 0; the fault injection
 * kills it on the way.  Returns main's status if it survives (1: the
 * test fails), after saying so (what: the step that should have killed
 * it). */
static inline int ks_victim(unsigned char *buf, size_t len, const char *what)
{
    tap_fill(buf, len, 11);
    MPI_Send(buf, (int)len, MPI_BYTE, 0, KS_TAG_VICTIM, MPI_COMM_WORLD);
    tap_diag("rank 1 survived its %s", what);
    MPI_Finalize();
    return 1;
}

/* Rank 2: the rendezvous message of next bytes and the eager one, then
 * the verdict on its sends; returns main's status. */
static inline int ks_bystander(unsigned char *buf, size_t next)
{
    int ok = 1;

    tap_fill(buf, next, KS_SEED);
    ok &= MPI_Send(buf, (int)next, MPI_BYTE, 0, KS_TAG_NEXT,
                   MPI_COMM_WORLD) == MPI_SUCCESS;
    ok &= MPI_Send(buf, KS_EAGER, MPI_BYTE, 0, KS_TAG_EAGER,
                   MPI_COMM_WORLD) == MPI_SUCCESS;
    MPI_Send(&ok, 1, MPI_INT, 0, KS_TAG_VERDICT, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}

/* Rank 0: 1 if rank 2's two messages came intact (buf holds cap bytes,
 * at least next). */
static inline int ks_bystander_intact(unsigned char *buf, size_t cap,
                                      size_t next)
{
    return MPI_Recv(buf, (int)cap, MPI_BYTE, 2, KS_TAG_NEXT, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS &&
           tap_check(buf, next, KS_SEED) &&
           MPI_Recv(buf, KS_EAGER, MPI_BYTE, 2, KS_TAG_EAGER, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS &&
           tap_check(buf, KS_EAGER, KS_SEED);
}

/* Rank 0: rank 2's verdict on its sends. */
static inline int ks_bystander_verdict(void)
{
    int ok = 0;

    return MPI_Recv(&ok, 1, MPI_INT, 2, KS_TAG_VERDICT, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE) == MPI_SUCCESS && ok;
}

#endif
