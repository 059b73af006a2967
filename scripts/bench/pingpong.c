/*
 * pingpong: two-rank MPI latency and bandwidth benchmark for ftwrap.
 *
 *   pingpong [--sizes LIST] [--iters SCALE] [--reps N] [--window W]
 *            [--lat-only | --bw-only] [--onebuf] [--persistent |
 *            --nonblocking]
 *
 * Latency: rank 0 sends a message of the given size, rank 1 answers with one
 * of the same size; the time reported is half the round trip, in µs.
 *
 * Bandwidth: rank 0 posts a window of W (64) MPI_Isend, rank 1 a window of W
 * MPI_Irecv; after both complete rank 1 sends a 1-byte acknowledgement.  The
 * rate is bytes moved over rank 0's time, in GB/s (1e9 bytes/s).  Every
 * message of a window has a buffer of its own (MPI forbids overlapping
 * receive buffers), so the window is cut to fit 256 MiB when size * W is
 * larger: at 64 MiB it is 4.  A "# window" line says so.  --onebuf is
 * osu_bw's way instead: all W sends from one buffer, all W receives into
 * one buffer, the window never cut.  --persistent runs the latency test
 * with persistent requests (MPI_Send_init and MPI_Recv_init made once per
 * size, started every iteration), --nonblocking with MPI_Isend and
 * MPI_Irecv posted the same way (what the persistent requests replace).
 *
 * Sizes default to 1 B, 2 B, 4 B, ... 64 MiB.  --sizes takes a comma
 * separated list, each number optionally with a K, M or G (binary) suffix.
 * --iters multiplies every iteration count (0.1 for a smoke run).
 *
 * Every size has warm-up iterations, then --reps (5) timed repetitions;
 * the median of the repetitions is printed, one line per size:
 *
 *   lat <bytes> <usec>
 *   bw <bytes> <GBps>
 *
 * Other lines start with '#'.
 *
 * Data are checked: each message carries a base pattern that depends on the
 * sender and size, and its first and last bytes carry marks that change with
 * the iteration (and the message's slot in the window).  Receivers check the
 * marks of every message and the whole message on the first warm-up
 * iteration and the last timed one, outside the timed region.  A mismatch
 * aborts the job with a message.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#define BENCH_NAME "pingpong"
#include "bench.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 64
#define MAX_REPS 101
#define DEFAULT_MAX_SIZE ((size_t)64 << 20)
#define WINDOW_BYTES_CAP ((size_t)256 << 20)

#define TAG_PING 1
#define TAG_PONG 2
#define TAG_BW 3
#define TAG_ACK 4

struct opts {
    size_t sizes[MAX_SIZES];
    int nsizes;
    double scale;
    int reps;
    int window;
    int lat;
    int bw;
    int onebuf;
    int persistent;     /* 1 persistent, 2 nonblocking */
};

/* ---- data pattern ----------------------------------------------------- */

static unsigned ilog2(size_t n)
{
    unsigned l = 0;
    while (n > 1) {
        n >>= 1;
        l++;
    }
    return l;
}

/* Seed of the pattern that rank `from` sends at `size`. */
static unsigned seed_of(int from, size_t size)
{
    return (unsigned)from * 101u + ilog2(size) * 13u + (unsigned)(size & 0xff);
}

/*
 * The base pattern repeats with a prime period, so that filling and checking
 * a buffer are memcpy and memcmp of a table, and data landing at an offset
 * that is a multiple of a page still shows up as wrong.
 */
#define PERIOD 65521u

struct pattern {
    unsigned seed;
    int valid;
    uint8_t tab[PERIOD];  /* the base pattern */
    uint8_t ntab[PERIOD]; /* its complement, to poison receive buffers */
};

static struct pattern pcache[2];
static int pnext;

static const struct pattern *pattern(unsigned seed)
{
    for (int i = 0; i < 2; i++)
        if (pcache[i].valid && pcache[i].seed == seed)
            return &pcache[i];
    struct pattern *p = &pcache[pnext];
    pnext ^= 1;
    for (unsigned k = 0; k < PERIOD; k++) {
        p->tab[k] = (uint8_t)((k ^ (k >> 7)) * 29u + (k >> 8) * 3u + seed);
        p->ntab[k] = (uint8_t)~p->tab[k];
    }
    p->seed = seed;
    p->valid = 1;
    return p;
}

static inline uint8_t mark_first(unsigned seed, long iter, int slot)
{
    return (uint8_t)((unsigned long)iter * 31u + (unsigned)slot * 7u + seed + 1u);
}

static inline uint8_t mark_last(unsigned seed, long iter, int slot)
{
    unsigned long i = (unsigned long)iter;
    return (uint8_t)(i * 17u + (i >> 8) * 5u + (unsigned)slot * 3u + seed + 2u);
}

static inline void set_marks(uint8_t *buf, size_t size, unsigned seed,
                             long iter, int slot)
{
    if (size == 0)
        __builtin_unreachable();
    buf[0] = mark_first(seed, iter, slot);
    buf[size - 1] = mark_last(seed, iter, slot);
}

static void fill_tab(uint8_t *buf, size_t size, const uint8_t *tab)
{
    for (size_t off = 0; off < size; off += PERIOD) {
        size_t n = size - off < PERIOD ? size - off : PERIOD;
        memcpy(buf + off, tab, n);
    }
}

static void fill_base(uint8_t *buf, size_t size, unsigned seed)
{
    fill_tab(buf, size, pattern(seed)->tab);
}

/* Receive buffers start as the complement of what should arrive. */
static void poison(uint8_t *buf, size_t size, unsigned seed, long iter, int slot)
{
    fill_tab(buf, size, pattern(seed)->ntab);
    set_marks(buf, size, seed, iter, slot);
    buf[0] = (uint8_t)~buf[0];
    if (size > 1)
        buf[size - 1] = (uint8_t)~buf[size - 1];
}

static inline void check_marks(const char *what, const uint8_t *buf,
                               size_t size, unsigned seed, long iter, int slot)
{
    /* For one byte the last mark is the only one. */
    if (size > 1 && buf[0] != mark_first(seed, iter, slot))
        die("%s: size %zu: first byte wrong at iteration %ld", what, size,
            iter);
    if (buf[size - 1] != mark_last(seed, iter, slot))
        die("%s: size %zu: last byte wrong at iteration %ld", what, size,
            iter);
}

static void check_full(const char *what, const uint8_t *buf, size_t size,
                       unsigned seed, long iter, int slot)
{
    const uint8_t *tab = pattern(seed)->tab;

    check_marks(what, buf, size, seed, iter, slot);
    /* Bytes 1 .. size-2 hold the base pattern. */
    for (size_t off = 0; off + 1 < size; off += PERIOD) {
        size_t lo = off ? off : 1;
        size_t hi = size - 1 - off < PERIOD ? size - 1 : off + PERIOD;
        if (lo >= hi || !memcmp(buf + lo, tab + (lo - off), hi - lo))
            continue;
        for (size_t k = lo; k < hi; k++)
            if (buf[k] != tab[k - off])
                die("%s: size %zu: byte %zu is 0x%02x, expected 0x%02x",
                    what, size, k, buf[k], tab[k - off]);
    }
}

/* ---- iteration counts ------------------------------------------------- */

static long scaled(long n, double scale, long min)
{
    double v = (double)n * scale;
    if (v < (double)min)
        return min;
    return (long)v;
}

static long lat_iters(size_t size, double scale)
{
    size_t n = ((size_t)32 << 20) / size; /* ~32 MiB each way per rep */
    if (n > 10000)
        n = 10000;
    if (n < 2)
        n = 2;
    return scaled((long)n, scale, 2);
}

static int bw_window(size_t size, int window)
{
    size_t fit = WINDOW_BYTES_CAP / size;
    if (fit < 1)
        fit = 1;
    return (size_t)window <= fit ? window : (int)fit;
}

static long bw_windows(size_t size, int window, double scale)
{
    size_t n = ((size_t)128 << 20) / (size * (size_t)window);
    if (n > 400)
        n = 400;
    if (n < 1)
        n = 1;
    return scaled((long)n, scale, 1);
}

/* ---- statistics ------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- benchmarks ------------------------------------------------------- */

/* One ping-pong of `size` bytes, iteration `it`; checks marks. */
static inline void pingpong_once(uint8_t *sbuf, uint8_t *rbuf, size_t size,
                                 long it, unsigned s0, unsigned s1)
{
    if (rank == 0) {
        set_marks(sbuf, size, s0, it, 0);
        MPI_Send(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
        MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, TAG_PONG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        check_marks("latency reply", rbuf, size, s1, it, 0);
    } else {
        MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        check_marks("latency ping", rbuf, size, s0, it, 0);
        set_marks(sbuf, size, s1, it, 0);
        MPI_Send(sbuf, (int)size, MPI_BYTE, 0, TAG_PONG, MPI_COMM_WORLD);
    }
}

static int lat_persistent;   /* struct opts' persistent */

/* The same with persistent requests: sr sends, rr receives (or, with
 * --nonblocking, the one-shot requests posted in their place). */
static inline void pingpong_once_p(uint8_t *sbuf, uint8_t *rbuf, size_t size,
                                   long it, unsigned s0, unsigned s1,
                                   MPI_Request *sr, MPI_Request *rr)
{
    if (lat_persistent == 2) {      /* the same with one-shot requests */
        int to = 1 - rank;

        if (rank == 0) {
            set_marks(sbuf, size, s0, it, 0);
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, 1, TAG_PONG, MPI_COMM_WORLD,
                      rr);
            MPI_Isend(sbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD,
                      sr);
            MPI_Wait(sr, MPI_STATUS_IGNORE);
            MPI_Wait(rr, MPI_STATUS_IGNORE);
            check_marks("latency reply", rbuf, size, s1, it, 0);
        } else {
            MPI_Irecv(rbuf, (int)size, MPI_BYTE, to, TAG_PING,
                      MPI_COMM_WORLD, rr);
            MPI_Wait(rr, MPI_STATUS_IGNORE);
            check_marks("latency ping", rbuf, size, s0, it, 0);
            set_marks(sbuf, size, s1, it, 0);
            MPI_Isend(sbuf, (int)size, MPI_BYTE, to, TAG_PONG,
                      MPI_COMM_WORLD, sr);
            MPI_Wait(sr, MPI_STATUS_IGNORE);
        }
        return;
    }
    if (rank == 0) {
        set_marks(sbuf, size, s0, it, 0);
        MPI_Start(rr);
        MPI_Start(sr);
        MPI_Wait(sr, MPI_STATUS_IGNORE);
        MPI_Wait(rr, MPI_STATUS_IGNORE);
        check_marks("latency reply", rbuf, size, s1, it, 0);
    } else {
        MPI_Start(rr);
        MPI_Wait(rr, MPI_STATUS_IGNORE);
        check_marks("latency ping", rbuf, size, s0, it, 0);
        set_marks(sbuf, size, s1, it, 0);
        MPI_Start(sr);
        MPI_Wait(sr, MPI_STATUS_IGNORE);
    }
}

static MPI_Request lat_sr = MPI_REQUEST_NULL, lat_rr = MPI_REQUEST_NULL;

static inline void lat_once(uint8_t *sbuf, uint8_t *rbuf, size_t size,
                            long it, unsigned s0, unsigned s1)
{
    if (lat_persistent)
        pingpong_once_p(sbuf, rbuf, size, it, s0, s1, &lat_sr, &lat_rr);
    else
        pingpong_once(sbuf, rbuf, size, it, s0, s1);
}

static void bench_lat(size_t size, const struct opts *o, uint8_t *sbuf,
                      uint8_t *rbuf)
{
    unsigned s0 = seed_of(0, size), s1 = seed_of(1, size);
    long iters = lat_iters(size, o->scale);
    long warm = iters / 10 < 1 ? 1 : iters / 10;
    unsigned me = rank == 0 ? s0 : s1, peer = rank == 0 ? s1 : s0;
    double t[MAX_REPS];
    long it = 0;

    fill_base(sbuf, size, me);
    poison(rbuf, size, peer, 0, 0);
    lat_persistent = o->persistent;
    if (o->persistent == 1) {
        int to = 1 - rank;

        MPI_Send_init(sbuf, (int)size, MPI_BYTE, to,
                      rank == 0 ? TAG_PING : TAG_PONG, MPI_COMM_WORLD,
                      &lat_sr);
        MPI_Recv_init(rbuf, (int)size, MPI_BYTE, to,
                      rank == 0 ? TAG_PONG : TAG_PING, MPI_COMM_WORLD,
                      &lat_rr);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    lat_once(sbuf, rbuf, size, it, s0, s1);
    check_full(rank == 0 ? "latency reply" : "latency ping", rbuf, size, peer,
               it, 0);
    for (it = 1; it < warm; it++)
        lat_once(sbuf, rbuf, size, it, s0, s1);

    for (int r = 0; r < o->reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++, it++)
            lat_once(sbuf, rbuf, size, it, s0, s1);
        t[r] = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)iters);
    }
    check_full(rank == 0 ? "latency reply" : "latency ping", rbuf, size, peer,
               it - 1, 0);
    if (o->persistent == 1) {
        MPI_Request_free(&lat_sr);
        MPI_Request_free(&lat_rr);
    }

    if (rank == 0) {
        printf("lat %zu %.3f\n", size, median(t, o->reps));
        fflush(stdout);
    }
}

/* One window: rank 0 sends `w` messages from its slots, rank 1 receives
 * (onebuf: every message from slot 0 into slot 0). */
static inline void window_once(uint8_t *buf, size_t size, int w, long it,
                               unsigned seed, MPI_Request *req,
                               MPI_Status *st, int onebuf)
{
    int nslots = onebuf ? 1 : w;
    char ack = 0;
    if (rank == 0) {
        for (int j = 0; j < w; j++) {
            uint8_t *m = buf + (size_t)(j % nslots) * size;
            if (j < nslots)
                set_marks(m, size, seed, it, j);
            MPI_Isend(m, (int)size, MPI_BYTE, 1, TAG_BW, MPI_COMM_WORLD,
                      &req[j]);
        }
        MPI_Waitall(w, req, st);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, TAG_ACK, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    } else {
        for (int j = 0; j < w; j++)
            MPI_Irecv(buf + (size_t)(j % nslots) * size, (int)size, MPI_BYTE,
                      0, TAG_BW, MPI_COMM_WORLD, &req[j]);
        MPI_Waitall(w, req, st);
        MPI_Send(&ack, 1, MPI_CHAR, 0, TAG_ACK, MPI_COMM_WORLD);
        for (int j = 0; j < nslots; j++)
            check_marks("bandwidth", buf + (size_t)j * size, size, seed, it, j);
    }
}

static void bench_bw(size_t size, const struct opts *o, uint8_t *buf,
                     MPI_Request *req, MPI_Status *st)
{
    unsigned seed = seed_of(0, size);
    int w = o->onebuf ? o->window : bw_window(size, o->window);
    int nslots = o->onebuf ? 1 : w;
    long nwin = bw_windows(size, w, o->scale);
    long warm = nwin / 10 < 1 ? 1 : nwin / 10;
    double t[MAX_REPS];
    long it = 0;

    if (rank == 0 && w != o->window)
        printf("# window %zu %d\n", size, w);

    for (int j = 0; j < nslots; j++) {
        uint8_t *m = buf + (size_t)j * size;
        if (rank == 0)
            fill_base(m, size, seed);
        else
            poison(m, size, seed, 0, j);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    window_once(buf, size, w, it, seed, req, st, o->onebuf);
    if (rank == 1)
        for (int j = 0; j < nslots; j++)
            check_full("bandwidth", buf + (size_t)j * size, size, seed, it, j);
    for (it = 1; it < warm; it++)
        window_once(buf, size, w, it, seed, req, st, o->onebuf);

    for (int r = 0; r < o->reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < nwin; i++, it++)
            window_once(buf, size, w, it, seed, req, st, o->onebuf);
        double dt = MPI_Wtime() - t0;
        t[r] = (double)size * (double)w * (double)nwin / dt / 1e9;
    }
    if (rank == 1)
        for (int j = 0; j < nslots; j++)
            check_full("bandwidth", buf + (size_t)j * size, size, seed, it - 1,
                       j);

    if (rank == 0) {
        printf("bw %zu %.4f\n", size, median(t, o->reps));
        fflush(stdout);
    }
}

/* ---- options ---------------------------------------------------------- */

static int usage(const char *msg)
{
    if (rank == 0) {
        if (msg)
            fprintf(stderr, "pingpong: %s\n", msg);
        fprintf(stderr,
                "usage: pingpong [--sizes N[K|M|G][,...]] [--iters SCALE] "
                "[--reps N] [--window W] [--lat-only | --bw-only] "
                "[--onebuf] [--persistent | --nonblocking]\n");
    }
    return 2;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v == 0 || v > (unsigned long long)INT32_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    o->nsizes = 0;
    o->scale = 1.0;
    o->reps = 5;
    o->window = 64;
    o->lat = o->bw = 1;
    o->onebuf = 0;
    o->persistent = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--sizes") && v) {
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                if (o->nsizes == MAX_SIZES ||
                    parse_size(t, &o->sizes[o->nsizes]) < 0) {
                    free(copy);
                    return usage("bad --sizes list");
                }
                o->nsizes++;
            }
            free(copy);
            if (!o->nsizes)
                return usage("empty --sizes list");
            i++;
        } else if (!strcmp(a, "--iters") && v) {
            char *end;
            o->scale = strtod(v, &end);
            if (*end || !(o->scale > 0) || o->scale > 1000)
                return usage("bad --iters scale");
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            o->reps = atoi(v);
            if (o->reps < 1 || o->reps > MAX_REPS)
                return usage("bad --reps");
            i++;
        } else if (!strcmp(a, "--window") && v) {
            o->window = atoi(v);
            if (o->window < 1 || o->window > 4096)
                return usage("bad --window");
            i++;
        } else if (!strcmp(a, "--lat-only")) {
            o->bw = 0;
        } else if (!strcmp(a, "--bw-only")) {
            o->lat = 0;
        } else if (!strcmp(a, "--onebuf")) {
            o->onebuf = 1;
        } else if (!strcmp(a, "--persistent")) {
            o->persistent = 1;
        } else if (!strcmp(a, "--nonblocking")) {
            o->persistent = 2;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            return usage(NULL);
        } else {
            return usage("unknown or incomplete option");
        }
    }
    if (!o->lat && !o->bw)
        return usage("--lat-only and --bw-only exclude each other");
    if (!o->nsizes)
        for (size_t s = 1; s <= DEFAULT_MAX_SIZE; s *= 2)
            o->sizes[o->nsizes++] = s;
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    int nranks;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    int rc = parse_opts(argc, argv, &o);
    if (rc) {
        MPI_Finalize();
        return rc;
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs exactly 2 ranks, got %d\n",
                    nranks);
        MPI_Finalize();
        return 2;
    }

    /* Latency needs one send and one receive buffer of the largest size;
     * bandwidth needs the window's slots on one side only. */
    size_t maxsize = 0, maxwin = 0;
    for (int i = 0; i < o.nsizes; i++) {
        size_t s = o.sizes[i];
        size_t w = s * (size_t)(o.onebuf ? 1 : bw_window(s, o.window));
        if (s > maxsize)
            maxsize = s;
        if (w > maxwin)
            maxwin = w;
    }
    uint8_t *sbuf = malloc(maxsize);
    uint8_t *rbuf = malloc(maxsize);
    uint8_t *wbuf = o.bw ? malloc(maxwin) : NULL;
    /* Real status arrays: MPICH's headers make GCC flag
     * MPI_STATUSES_IGNORE as a zero-sized array. */
    MPI_Request *req = malloc(sizeof *req * (size_t)o.window);
    MPI_Status *st = malloc(sizeof *st * (size_t)o.window);
    if (!sbuf || !rbuf || (o.bw && !wbuf) || !req || !st)
        die("cannot allocate %zu + %zu bytes", 2 * maxsize, maxwin);

    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n\r,")] = 0;
        for (char *c = ver; *c; c++) /* MPICH: "MPICH Version:\t4.0.2" */
            if (*c == '\t')
                *c = ' ';
        printf("# pingpong: %s; reps %d, window %d, iters x%g\n", ver, o.reps,
               o.window, o.scale);
        fflush(stdout);
    }

    for (int i = 0; o.lat && i < o.nsizes; i++)
        bench_lat(o.sizes[i], &o, sbuf, rbuf);
    for (int i = 0; o.bw && i < o.nsizes; i++)
        bench_bw(o.sizes[i], &o, wbuf, req, st);

    free(sbuf);
    free(rbuf);
    free(wbuf);
    free(req);
    free(st);
    MPI_Finalize();
    return 0;
}
