/*
 * survive - the computation of the cluster checks (tests/cluster.sh).
 *
 *   survive STEPS
 *
 * STEPS rounds, 10 ms apart, on a communicator c (MPI_COMM_WORLD at
 * first, with MPI_ERRORS_RETURN): a ring exchange (each rank sends its
 * world rank to the next rank of c and checks what the previous one sent)
 * and an MPI_Allreduce of world rank + 1, whose sum must be the sum of
 * world rank + 1 over c's members.  Any error starts a recovery, the
 * sequence a fault-tolerant solver runs:
 *
 *   FTW_Comm_validate   agree on who failed (the failed group must not be
 *                       empty: something did fail);
 *   FTW_Comm_drain_all  cut the ring traffic still in flight; what the
 *                       failed round left outstanding ends here;
 *   MPIX_Comm_revoke    c is done with, everywhere;
 *   MPIX_Comm_shrink    c's live processes, the new c;
 *   MPIX_Comm_agree     on the AND of ~(1 << world rank): the result must
 *                       have exactly the bits of the new c's members clear;
 *   MPI_Allreduce(MIN)  of the round each survivor was in: all go on from
 *                       the earliest (a round that completed somewhere
 *                       before the failure is repeated there, harmlessly).
 *
 * A failure during the recovery starts it again on the shrunk (or the
 * same) communicator.  Each rank prints "rank R: ok SUM ALIVE" (ALIVE:
 * the size of the final c) or "rank R: WRONG ..." at the end and exits 0
 * only if every round and every recovery step was right; after its first
 * round it prints "rank R: running" to stderr (the cluster checks inject
 * their fault only once every rank has).  A process
 * declared failed while alive (a partitioned host) is ended by ftwrap
 * (exit 75) and prints nothing.
 *
 * After a recovery the result buffer is replaced by a fresh one when
 * FTW_Buffer_quarantined says the failed round's abandoned collective may
 * still write it (ftwrap.h): after a partition heals, what the cut-off
 * side sent may still complete that collective.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ftwrap.h"

static int wrank, wsize;
/* The ring's requests and buffers outlive a failed round: the recovery's
 * drain ends them. */
static MPI_Request ring[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
static int ring_from, ring_to;

/* World ranks of the members of the current communicator, by rank. */
static int *members;

static void set_members(MPI_Comm c)
{
    MPI_Group g, wg;
    int n, *ranks;

    MPI_Comm_size(c, &n);
    ranks = malloc(sizeof(int) * (size_t)n);
    members = realloc(members, sizeof(int) * (size_t)n);
    for (int r = 0; r < n; r++)
        ranks[r] = r;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, n, ranks, wg, members);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
}

/* One round on c: ring exchange, then the sum.  MPI_SUCCESS, or the first
 * error; *bad counts wrong values. */
static int round_on(MPI_Comm c, long *sum, int *bad)
{
    int r, n, rc, left_w;
    MPI_Status st[2];
    long v = wrank + 1, want = 0;

    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    left_w = members[(r + n - 1) % n];
    ring_from = -1;
    ring_to = wrank;
    MPI_Irecv(&ring_from, 1, MPI_INT, (r + n - 1) % n, 0, c, &ring[0]);
    MPI_Isend(&ring_to, 1, MPI_INT, (r + 1) % n, 0, c, &ring[1]);
    rc = MPI_Waitall(2, ring, st);
    if (rc != MPI_SUCCESS)
        return rc;      /* what is still outstanding ends in the drain */
    if (ring_from != left_w) {
        fprintf(stderr, "rank %d: ring got %d, want %d\n", wrank, ring_from,
                left_w);
        ++*bad;
    }
    rc = MPI_Allreduce(&v, sum, 1, MPI_LONG, MPI_SUM, c);
    if (rc != MPI_SUCCESS)
        return rc;
    for (int q = 0; q < n; q++)
        want += members[q] + 1;
    if (*sum != want) {
        fprintf(stderr, "rank %d: sum %ld, want %ld\n", wrank, *sum, want);
        ++*bad;
    }
    return MPI_SUCCESS;
}

/* The recovery on *c: 0 and the new *c and *step, or -1 (a step failed
 * for good: reported). */
static int recover(MPI_Comm *c, int *step, long **sum, int *bad)
{
    MPI_Group fg;
    MPI_Comm nc;
    int nf = 0, rc, flag, want, n, q = 0, s;
    MPI_Status st[2];

    rc = FTW_Comm_validate(*c, &fg);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: validate: %d\n", wrank, rc);
        return -1;
    }
    MPI_Group_size(fg, &nf);
    MPI_Group_free(&fg);
    FTW_Buffer_quarantined(*sum, sizeof(**sum), &q);
    if (q)
        *sum = calloc(1, sizeof(**sum));    /* the old one is lost */
    rc = FTW_Comm_drain_all(*c);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: drain_all: %d\n", wrank, rc);
        return -1;
    }
    MPI_Waitall(2, ring, st);  /* ended by the drain */
    MPIX_Comm_revoke(*c);
    rc = MPIX_Comm_shrink(*c, &nc);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: shrink: %d\n", wrank, rc);
        return -1;
    }
    MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
    if (*c != MPI_COMM_WORLD)
        MPI_Comm_free(c);
    *c = nc;
    set_members(nc);
    MPI_Comm_size(nc, &n);
    if (nf == 0 && n == wsize) {
        fprintf(stderr, "rank %d: an error, and nobody failed\n", wrank);
        ++*bad;
    }
    flag = ~(1 << wrank);
    rc = MPIX_Comm_agree(nc, &flag);
    if (rc != MPI_SUCCESS)
        return 1;                           /* a new failure: again */
    want = ~0;
    for (int r = 0; r < n; r++)
        want &= ~(1 << members[r]);
    if (flag != want) {
        fprintf(stderr, "rank %d: agree gave %#x, want %#x\n", wrank,
                (unsigned)flag, (unsigned)want);
        ++*bad;
    }
    rc = MPI_Allreduce(step, &s, 1, MPI_INT, MPI_MIN, nc);
    if (rc != MPI_SUCCESS)
        return 1;
    *step = s;
    return 0;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 300, bad = 0, n;
    long *sum = calloc(1, sizeof(*sum));
    MPI_Comm c = MPI_COMM_WORLD;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    set_members(MPI_COMM_WORLD);
    for (int s = 0; s < steps; s++) {
        int rc;

        if (round_on(c, sum, &bad) == MPI_SUCCESS) {
            if (s == 0)
                fprintf(stderr, "rank %d: running\n", wrank);
            usleep(10000);
            continue;
        }
        while ((rc = recover(&c, &s, &sum, &bad)) > 0)
            ;
        if (rc < 0) {
            bad++;
            break;
        }
        s--;
    }
    MPI_Comm_size(c, &n);
    if (bad)
        printf("rank %d: WRONG (%d bad)\n", wrank, bad);
    else
        printf("rank %d: ok %ld %d\n", wrank, *sum, n);
    fflush(stdout);
    if (c != MPI_COMM_WORLD)
        MPI_Comm_free(&c);
    MPI_Finalize();
    free(members);
    return bad ? 1 : 0;
}
