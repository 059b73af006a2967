/* ftw-test: np=2 mode=both timeout=120 env=FTW_RNDV_THRESHOLD=64k */
/*
 * rndv_probe_order - MPI's order kept when probes look at messages that
 * go through ftwrap's rendezvous: a probe for one tag that meets a large
 * message must not let a later receive of any tag take that message
 * before older ones from the same source.
 *
 * Rank 0 sends a sequence of N messages whose sizes mix below and above
 * the rendezvous threshold (100 B, 64 B: the size of an RTS, 4 KiB,
 * 200 KiB, 1 MiB) and
 * whose tags vary; each payload is its own (checksummed).  Rank 1,
 * asserts, one scenario per sequence:
 *  - MPI_Probe for the tag of a large message in the middle, then
 *    MPI_Recv with MPI_ANY_TAG for all: messages in send order;
 *  - the same with MPI_Iprobe (loop) and MPI_ANY_SOURCE receives;
 *  - two probes for two large messages of different tags, then
 *    MPI_Irecv of MPI_ANY_TAG for all + MPI_Waitall: in send order;
 *  - MPI_Mprobe + MPI_Mrecv of a large message of one tag, then
 *    MPI_ANY_TAG receives get the others in order;
 *  - a probe for one tag, then receives for the other tags by tag, then
 *    MPI_ANY_TAG: each gets the oldest message its selection matches;
 *  - every status (source, tag, count) and every payload checked;
 *    MPI_Probe with MPI_ANY_TAG after a probe for one tag reports the
 *    oldest message's tag and size.
 * Natively the same assertions hold (transparency).
 */
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define N 10

static int rank;
static const int tags[N] = { 1, 2, 1, 3, 2, 4, 1, 3, 5, 2 };
static const int sizes[N] = { 100, 64, 200 << 10, 1 << 20, 4096, 64,
                              200 << 10, 100, 1 << 20, 200 << 10 };
static unsigned char *sb[N], *rb;

/* Message j of scenario sc: its status and payload right? */
static int check(int sc, int j, const MPI_Status *st, const unsigned char *b)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    tap_fill(sb[j], (size_t)sizes[j], (uint64_t)(sc * 100 + j));
    return st->MPI_SOURCE == 0 && st->MPI_TAG == tags[j] &&
           count == sizes[j] && memcmp(b, sb[j], (size_t)sizes[j]) == 0;
}

static void send_all(int sc)
{
    MPI_Request req[N];
    MPI_Status st[N];

    for (int j = 0; j < N; j++) {
        tap_fill(sb[j], (size_t)sizes[j], (uint64_t)(sc * 100 + j));
        MPI_Isend(sb[j], sizes[j], MPI_BYTE, 1, tags[j], MPI_COMM_WORLD,
                  &req[j]);
    }
    MPI_Waitall(N, req, st);
}

/* Receive messages from..N-1 (those not in skip) with MPI_ANY_TAG. */
static int recv_rest(int sc, int from, unsigned skip, int anysrc)
{
    int ok = 1;

    for (int j = from; j < N; j++) {
        MPI_Status st;

        if (skip & (1u << j))
            continue;
        MPI_Recv(rb, 2 << 20, MPI_BYTE, anysrc ? MPI_ANY_SOURCE : 0,
                 MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        ok &= check(sc, j, &st, rb);
    }
    return ok;
}

static int sc_probe(int sc, int iprobe)
{
    MPI_Status st;
    int ok = 1, flag = 0, count = -1;

    if (iprobe)
        while (!flag)
            MPI_Iprobe(0, 3, MPI_COMM_WORLD, &flag, &st);
    else
        MPI_Probe(0, 3, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    ok &= st.MPI_TAG == 3 && count == sizes[3];
    /* A probe of any tag now reports the oldest message. */
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    ok &= st.MPI_TAG == tags[0] && count == sizes[0];
    return ok & recv_rest(sc, 0, 0, iprobe);
}

static int sc_two_probes(int sc)
{
    static unsigned char *bufs[N];
    MPI_Request req[N];
    MPI_Status st[N];
    int ok = 1, count = -1;

    MPI_Probe(0, 5, MPI_COMM_WORLD, &st[0]);
    MPI_Get_count(&st[0], MPI_BYTE, &count);
    ok &= count == sizes[8];
    MPI_Probe(0, 3, MPI_COMM_WORLD, &st[0]);
    MPI_Get_count(&st[0], MPI_BYTE, &count);
    ok &= count == sizes[3];
    for (int j = 0; j < N; j++) {
        if (bufs[j] == NULL)
            bufs[j] = malloc(2 << 20);
        MPI_Irecv(bufs[j], 2 << 20, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD,
                  &req[j]);
    }
    MPI_Waitall(N, req, st);
    for (int j = 0; j < N; j++)
        ok &= check(sc, j, &st[j], bufs[j]);
    return ok;
}

static int sc_mprobe(int sc)
{
    MPI_Message msg;
    MPI_Status st;
    int ok;

    MPI_Mprobe(0, 4, MPI_COMM_WORLD, &msg, &st);
    ok = st.MPI_TAG == 4;
    MPI_Mrecv(rb, 2 << 20, MPI_BYTE, &msg, &st);
    ok &= check(sc, 5, &st, rb);
    MPI_Probe(0, 3, MPI_COMM_WORLD, &st);
    return ok & recv_rest(sc, 0, 1u << 5, 0);
}

/* Probe tag 3, receive tag 2's messages by tag, then the rest. */
static int sc_by_tag(int sc)
{
    MPI_Status st;
    int ok = 1;

    MPI_Probe(0, 3, MPI_COMM_WORLD, &st);
    for (int j = 0; j < N; j++) {
        if (tags[j] != 2)
            continue;
        MPI_Recv(rb, 2 << 20, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &st);
        ok &= check(sc, j, &st, rb);
    }
    return ok & recv_rest(sc, 0, 1u << 1 | 1u << 4 | 1u << 9, 0);
}

int main(int argc, char **argv)
{
    static const char *names[] = {
        "MPI_Probe of one tag, then MPI_ANY_TAG receives: send order",
        "MPI_Iprobe of one tag, then MPI_ANY_SOURCE/MPI_ANY_TAG: send order",
        "two probes of two tags, then MPI_Irecv MPI_ANY_TAG window: order",
        "MPI_Mprobe/MPI_Mrecv of one tag, then MPI_ANY_TAG: the rest in order",
        "probe of one tag, receives by another tag, then MPI_ANY_TAG",
    };
    int nsc = (int)(sizeof(names) / sizeof(names[0]));

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int j = 0; j < N; j++)
        sb[j] = malloc((size_t)sizes[j]);
    rb = malloc(2 << 20);
    tap_plan(nsc);
    for (int sc = 0; sc < nsc; sc++) {
        int ok = 1;

        if (rank == 0) {
            send_all(sc);
        } else {
            switch (sc) {
            case 0: ok = sc_probe(sc, 0); break;
            case 1: ok = sc_probe(sc, 1); break;
            case 2: ok = sc_two_probes(sc); break;
            case 3: ok = sc_mprobe(sc); break;
            default: ok = sc_by_tag(sc); break;
            }
        }
        tap_ok(ok, "%s", names[sc]);
    }
    MPI_Finalize();
    return tap_failed_ != 0;
}
