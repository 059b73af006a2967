/* ftw-test: np=4 mode=ftwrap timeout=40 link=ftwrap */
/*
 * drain_peer - FTW_Comm_drain_peer between ranks 0 and 1, no failure.
 *
 * Before the drain, on MPI_COMM_WORLD: rank 1 sends rank 0 three small
 * checksummed messages, tags 5, 6, 7, that rank 0 never receives (it
 * probes them with MPI_Iprobe until all three are in); rank 0 sends rank
 * 1 one, tag 8, that rank 1 never receives (probed likewise); each of 0
 * and 1 has a pending MPI_Irecv from the other, tag 9, that nobody
 * matches.  Rank 0 sends rank 2 a message (tag 12) and rank 1 sends rank
 * 3 one (tag 12), received only after the drain; rank 2 has a pending
 * MPI_Irecv from rank 0 (tag 11) that rank 0 sends after the drain.
 * Ranks 0 and 1 call FTW_Comm_drain_peer(MPI_COMM_WORLD, other):
 * MPI_SUCCESS, bounded time; MPI_Wait on the tag-9 receives gives
 * FTW_ERR_DRAINED at once.  Then rank 0 sees nothing from rank 1
 * (MPI_Iprobe(1, MPI_ANY_TAG) for 200 ms), sends rank 1 new checksummed
 * messages (64 B and 1 MiB); rank 1 receives them, sees nothing more from
 * rank 0 (200 ms), and sends rank 0 new messages with tags 5, 6, 7 (other
 * checksums: an old one matched would fail) and a 1 MiB one.
 * Meanwhile ranks 2 and 3 exchange 50 checksummed 4 KiB messages with
 * MPI_Sendrecv, undisturbed.  After the drain rank 2 gets rank 0's tag-11
 * and tag-12 messages and rank 3 rank 1's tag-12 message, all intact (a
 * drain between 0 and 1 leaves their traffic with others alone).  Last a
 * ring 0 -> 1 -> 2 -> 3 -> 0 of 8 B and 1 MiB.  Ranks 1-3 send their
 * verdicts to rank 0, which prints TAP (plan at the end).
 */
#define NP 4
#include "ftcheck.h"

#define NSURV 4
#define TAG_P 9
#define TAG_TO_0 11
#define TAG_OTHER 12
#define TAG_BIG 13
#define TAG_23 14
#define MARK_OLD 1
#define MARK_NEW 2
#define NPP 50
#define PP_LEN 4096

/* A small checksummed message, blocking. */
static void send_small(int to, int tag, int mark, const char *what)
{
    unsigned char buf[SMALL];
    char desc[96];
    int rc;

    tap_fill(buf, SMALL, seed_of(rank, to, mark * 100 + tag, SMALL));
    rc = MPI_Send(buf, SMALL, MPI_BYTE, to, tag, MPI_COMM_WORLD);
    snprintf(desc, sizeof desc, "%s: MPI_Send to %d, tag %d", what, to, tag);
    chk_class(rc, MPI_SUCCESS, desc);
}

static void recv_small(int from, int tag, int mark, const char *what)
{
    unsigned char buf[SMALL];
    MPI_Status st;
    char desc[96];
    int rc;
    double t0 = MPI_Wtime();

    memset(buf, 0, sizeof buf);
    rc = MPI_Recv(buf, SMALL, MPI_BYTE, from, tag, MPI_COMM_WORLD, &st);
    snprintf(desc, sizeof desc, "%s: MPI_Recv from %d, tag %d", what, from,
             tag);
    chk_data(rc, &st, buf, SMALL, seed_of(from, rank, mark * 100 + tag,
                                          SMALL), desc);
    chk_time(MPI_Wtime() - t0, BOUND, desc);
}

static void big(int from, int to, const char *what)
{
    unsigned char *buf = xmalloc(BIG);
    uint64_t seed = seed_of(from, to, MARK_NEW, BIG);
    MPI_Status st;
    char desc[96];
    int rc;

    snprintf(desc, sizeof desc, "%s: %d -> %d, 1 MiB", what, from, to);
    if (rank == from) {
        tap_fill(buf, BIG, seed);
        rc = MPI_Send(buf, BIG, MPI_BYTE, to, TAG_BIG, MPI_COMM_WORLD);
        chk_class(rc, MPI_SUCCESS, desc);
    } else {
        memset(buf, 0, BIG);
        rc = MPI_Recv(buf, BIG, MPI_BYTE, from, TAG_BIG, MPI_COMM_WORLD, &st);
        chk_data(rc, &st, buf, BIG, seed, desc);
    }
    free(buf);
}

/* Poll with MPI_Iprobe until from's message with tag is in. */
static void wait_in(int from, int tag)
{
    MPI_Status st;
    int flag = 0, rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();

    while (!flag && rc == MPI_SUCCESS && MPI_Wtime() - t0 < BOUND)
        rc = MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
    chk(rc == MPI_SUCCESS && flag, "before the drain: MPI_Iprobe(%d, %d) "
        "sees the message (%s, flag %d)", from, tag, CLS(rc), flag);
}

/* Ranks 0 and 1. */
static void pair(void)
{
    int other = 1 - rank, rc, pbuf = -1;
    MPI_Request p;
    MPI_Status st;
    double t0;

    step = "ranks 0, 1: before the drain";
    rc = MPI_Irecv(&pbuf, 1, MPI_INT, other, TAG_P, MPI_COMM_WORLD, &p);
    chk_class(rc, MPI_SUCCESS, "MPI_Irecv from the other, tag 9 (never "
              "sent)");
    if (rank == 1) {
        for (int tag = 5; tag <= 7; tag++)
            send_small(0, tag, MARK_OLD, "before the drain");
        send_small(3, TAG_OTHER, MARK_OLD, "before the drain");
        wait_in(0, 8);
    } else {
        send_small(1, 8, MARK_OLD, "before the drain");
        send_small(2, TAG_OTHER, MARK_OLD, "before the drain");
        for (int tag = 5; tag <= 7; tag++)
            wait_in(1, tag);
    }

    step = "FTW_Comm_drain_peer";
    t0 = MPI_Wtime();
    rc = FTW_Comm_drain_peer(MPI_COMM_WORLD, other);
    chk_class(rc, MPI_SUCCESS, "FTW_Comm_drain_peer(MPI_COMM_WORLD, other)");
    chk_time(MPI_Wtime() - t0, BOUND, "FTW_Comm_drain_peer");

    step = "MPI_Wait on the tag-9 receive";
    t0 = MPI_Wtime();
    rc = MPI_Wait(&p, &st);
    chk_class(rc, FTW_ERR_DRAINED, "MPI_Wait on the MPI_Irecv from the "
              "other (tag 9) after the drain");
    chk_time(MPI_Wtime() - t0, AT_ONCE, "MPI_Wait on the tag-9 receive");
    chk(pbuf == -1, "tag-9 receive buffer untouched (%d)", pbuf);

    step = "ranks 0, 1: after the drain";
    if (rank == 0) {
        chk_nothing(MPI_COMM_WORLD, 1, MPI_ANY_TAG, "after the drain, "
                    "nothing from rank 1");
        send_small(1, 5, MARK_NEW, "after the drain");
        big(0, 1, "after the drain");
        send_small(2, TAG_TO_0, MARK_NEW, "after the drain");
        for (int tag = 5; tag <= 7; tag++)
            recv_small(1, tag, MARK_NEW, "after the drain, a tag used "
                       "before");
        big(1, 0, "after the drain");
        chk_nothing(MPI_COMM_WORLD, 1, MPI_ANY_TAG, "at the end, nothing "
                    "more from rank 1");
    } else {
        recv_small(0, 5, MARK_NEW, "after the drain");
        big(0, 1, "after the drain");
        chk_nothing(MPI_COMM_WORLD, 0, MPI_ANY_TAG, "after the drain, "
                    "nothing more from rank 0");
        for (int tag = 5; tag <= 7; tag++)
            send_small(0, tag, MARK_NEW, "after the drain");
        big(1, 0, "after the drain");
    }
}

/* Ranks 2 and 3. */
static void bystanders(void)
{
    int other = 5 - rank, rc, bad = 0, fails = 0;
    unsigned char *sb = xmalloc(PP_LEN), *rb = xmalloc(PP_LEN);
    unsigned char b11[SMALL];
    MPI_Request r11 = MPI_REQUEST_NULL;
    MPI_Status st;
    double t0;

    step = "ranks 2, 3: ping-pong while 0 and 1 drain";
    if (rank == 2) {
        memset(b11, 0, sizeof b11);
        rc = MPI_Irecv(b11, SMALL, MPI_BYTE, 0, TAG_TO_0, MPI_COMM_WORLD,
                       &r11);
        chk_class(rc, MPI_SUCCESS, "MPI_Irecv from 0, tag 11, before the "
                  "drain");
    }
    t0 = MPI_Wtime();
    for (int i = 0; i < NPP; i++) {
        tap_fill(sb, PP_LEN, seed_of(rank, other, 1000 + i, PP_LEN));
        memset(rb, 0, PP_LEN);
        rc = MPI_Sendrecv(sb, PP_LEN, MPI_BYTE, other, TAG_23, rb, PP_LEN,
                          MPI_BYTE, other, TAG_23, MPI_COMM_WORLD, &st);
        if (rc != MPI_SUCCESS)
            fails++;
        else if (!tap_check(rb, PP_LEN, seed_of(other, rank, 1000 + i,
                                                PP_LEN)))
            bad++;
        usleep(2000);
    }
    chk(fails == 0 && bad == 0, "%d MPI_Sendrecv of %d B with rank %d "
        "meanwhile: %d failed, %d corrupted", NPP, PP_LEN, other, fails, bad);
    chk_time(MPI_Wtime() - t0, BOUND, "the ping-pong");

    if (rank == 2) {
        step = "rank 2: messages from 0";
        recv_small(0, TAG_OTHER, MARK_OLD, "sent before the other pair's "
                   "drain");
        t0 = MPI_Wtime();
        rc = MPI_Wait(&r11, &st);
        chk_data(rc, &st, b11, SMALL, seed_of(0, 2, MARK_NEW * 100 +
                                              TAG_TO_0, SMALL),
                 "MPI_Irecv posted before the other pair's drain, sent "
                 "after");
        chk_time(MPI_Wtime() - t0, BOUND, "MPI_Wait on the tag-11 receive");
    } else {
        step = "rank 3: message from 1";
        recv_small(1, TAG_OTHER, MARK_OLD, "sent before the other pair's "
                   "drain");
    }
    free(sb);
    free(rb);
}

int main(int argc, char **argv)
{
    static const int all[NSURV] = {0, 1, 2, 3};

    if (!setup(&argc, &argv))
        return 0;
    watchdog_start(15.0);
    if (rank < 2)
        pair();
    else
        bystanders();
    ring(all, NSURV, 8, 1);
    ring(all, NSURV, BIG, 2);
    return finish(all, NSURV);
}
