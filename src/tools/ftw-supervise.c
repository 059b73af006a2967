/*
 * ftw-supervise - run one MPI rank as a child and report how it ended.
 *
 *   ftw-supervise [--status-dir DIR] [--preload LIB] [--save-env VAR]...
 *                 -- app [args...]
 *
 * ftwrun starts every rank of an ftwrap job through this program.  It
 * forks, the child becomes the application (execvp), and the parent
 *
 *   - forwards every catchable signal it receives to the child (the
 *     launchers signal the process they started, which is this one: hydra
 *     sends SIGUSR1 when a peer dies, and SIGTERM/SIGINT/SIGHUP at teardown);
 *   - waits for the child;
 *   - writes the rank's outcome to DIR/<rank> as one line, "exit:<code>" or
 *     "signal:<NAME>" (e.g. "signal:KILL"); the rank comes from
 *     OMPI_COMM_WORLD_RANK or PMI_RANK;
 *   - exits with the child's exit code, or 128+signal if the child died by
 *     a signal.
 *
 * The last point is the reason this program exists: the launcher sees a
 * rank that was killed as a process that *exited* with status 128+signal.
 * Hydra tears down the whole job when a rank dies by a signal (even with
 * -disable-auto-cleanup) but lets the others run on when it merely exits
 * nonzero, so survivors keep running.
 *
 * The child asks for SIGKILL when this process dies (PR_SET_PDEATHSIG), so
 * a launcher that SIGKILLs the supervisor still takes the rank with it.
 *
 * --preload LIB makes the child run with LD_PRELOAD=LIB[:$LD_PRELOAD].
 * ftwrun hands libftwrap.so over this way rather than through the ranks'
 * LD_PRELOAD, so that the library (and the libmpi it links) is loaded into
 * the application only, never into this supervisor.
 *
 * With --status-dir the supervisor also creates DIR/pid.<its pid> when it
 * starts and writes the rank's pid into it once forked: should the
 * launcher go away and leave ranks running, ftwrun finds their supervisors
 * there and stops them.
 *
 * --save-env VAR (repeatable, needs --status-dir) writes the value of the
 * environment variable VAR, if set, to DIR/env.VAR before the rank starts.
 * ftwrun uses it to learn identifiers the launcher gives the job only in
 * the ranks' environment (Open MPI's job id, which names the job's
 * shared-memory files).
 *
 * --report-to ADDR[,ADDR...]:PORT: on a host where DIR does not exist
 * (ftwrun runs on another host, and /tmp is the node's own), the
 * supervisor sends its records over TCP instead, one connection per
 * record, trying the addresses in order: "start <rank> <hostname>" when
 * it starts and "fate <rank> <status>" when the rank ends.
 *
 *   ftw-supervise --collect DIR
 *
 * is the other end, which ftwrun runs on its own host: it listens on a TCP
 * port of every address (printed on stdout, one line, once listening),
 * writes each "fate" record to DIR/<rank> and each "start" record to
 * DIR/host.<rank>, exactly as a local supervisor would, and each "failed
 * <rank> lost" record (the job's lowest live process names the ranks the
 * job lost, at MPI_Finalize: ftwrap finds FTW_REPORT_TO, the address the
 * supervisor was given, in its environment) to DIR/failed.<rank>; on
 * SIGTERM it takes what is still queued and exits.
 *
 * --hold-pmix (ftwrun gives it under srun --mpi=pmix): Slurm's PMIx plugin
 * ends the whole step on any error event of its PMIx server, and a client
 * whose connection closes before it finalized raises one.  While the rank
 * runs, the supervisor takes a copy (pidfd_getfd) of each connection the
 * rank opens to a server on this host (a connected Unix-domain stream
 * socket, or TCP to 127.0.0.1 as PMIx uses); if the rank then ends other
 * than with exit 0, a holder process (the supervisor's child) keeps those
 * copies open, reading and dropping what arrives, and sends "hold <rank>"
 * to ftwrun's collector (--report-to); it lets go when the collector
 * closes that connection (ftwrun, having every rank's fate, sends the
 * collector SIGUSR1), when the server's ends close, or when it is killed
 * with the step, so the server never sees a client vanish while the
 * survivors run.  Without a collector to reach, nothing is held.  The
 * supervisor itself exits as usual: the launcher sees the rank end.
 *
 * No MPI in here: it must work unchanged under every launcher.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "util/record.h"

static volatile sig_atomic_t child_pid;

/* Signals passed on to the child.  SIGKILL and SIGSTOP cannot be caught;
 * SIGCHLD is ours; SIGPIPE and the synchronous faults (SEGV, BUS, ...)
 * concern this process, not the rank. */
static const int fwd_signals[] = {
    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
    SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU, SIGWINCH, SIGURG, SIGVTALRM,
    SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR,
};
#define NFWD (sizeof(fwd_signals) / sizeof(fwd_signals[0]))

static void forward(int sig)
{
    int saved = errno;
    pid_t pid = child_pid;

    if (pid > 0)
        kill(pid, sig);
    errno = saved;
}

/* ---- --hold-pmix ------------------------------------------------------ */

#define HOLD_MAX 16

static struct {
    int pidfd;
    int n;
    int fds[HOLD_MAX];          /* our copies */
    unsigned long ino[HOLD_MAX];
} hold = { .pidfd = -1 };

/* Whether socket inode ino is a connection to a server on this host: a
 * connected Unix-domain stream socket (/proc/net/unix: Type 0001, St 03)
 * or an established TCP connection to 127.0.0.1 (/proc/net/tcp: St 01;
 * PMIx clients reach their server this way). */
static int local_connection(unsigned long ino)
{
    FILE *f = fopen("/proc/net/unix", "r");
    char l[512];
    int found = 0;

    if (f == NULL)
        return 0;
    while (!found && fgets(l, sizeof(l), f)) {
        unsigned long type, st, i;

        if (sscanf(l, "%*s %*s %*s %*s %lx %lx %lu", &type, &st, &i) == 3 &&
            i == ino)
            found = type == 1 && st == 3 ? 1 : -1;
    }
    fclose(f);
    if (found || (f = fopen("/proc/net/tcp", "r")) == NULL)
        return found > 0;
    while (!found && fgets(l, sizeof(l), f)) {
        char rem[64];
        unsigned long st, i;

        if (sscanf(l, "%*s %*s %63s %lx %*s %*s %*s %*s %*s %lu", rem, &st,
                   &i) == 3 && i == ino)
            found = st == 1 && strncmp(rem, "0100007F:", 9) == 0 ? 1 : -1;
    }
    fclose(f);
    return found > 0;
}

/* Copy the rank's connections to local servers not held yet. */
static void hold_scan(pid_t pid)
{
    char path[64], link[64];
    struct dirent *e;
    DIR *d;

    if (hold.pidfd < 0 || hold.n == HOLD_MAX)
        return;
    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)pid);
    d = opendir(path);
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL && hold.n < HOLD_MAX) {
        char fdpath[352];
        unsigned long ino;
        ssize_t len;
        int k, fd;

        snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
        len = readlink(fdpath, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%lu]", &ino) != 1)
            continue;
        for (k = 0; k < hold.n && hold.ino[k] != ino; k++)
            ;
        if (k < hold.n || !local_connection(ino))
            continue;
        fd = (int)syscall(SYS_pidfd_getfd, hold.pidfd, atoi(e->d_name), 0);
        if (fd < 0)
            continue;
        hold.fds[hold.n] = fd;
        hold.ino[hold.n++] = ino;
    }
    closedir(d);
}

/* Wait for the child, copying its sockets every 100 ms meanwhile. */
static pid_t hold_wait(pid_t pid, int *status)
{
    for (;;) {
        struct pollfd p = { .fd = hold.pidfd, .events = POLLIN };
        pid_t r;

        if (poll(&p, 1, 100) == 0) {
            hold_scan(pid);
            continue;
        }
        r = waitpid(pid, status, WNOHANG);
        if (r != 0)
            return r;
    }
}

static const char *rank_of_env(void);

/* A connection to ftwrun's collector saying "hold <rank>", which the
 * collector closes once every rank of the job is accounted for; -1 if no
 * address answers. */
static int hold_dial(const char *spec)
{
    const char *rank = rank_of_env();
    char line[64];

    snprintf(line, sizeof(line), "hold %s\n", rank ? rank : "-1");
    return ftw_record_open(spec, line);
}

/* The rank is gone: a holder keeps the copies open until ftwrun's
 * collector releases it (every rank of the job accounted for, so ending
 * the step can harm none) or the other ends close; the supervisor drops
 * its own copies.  Without a collector to release it, nothing is held:
 * the step could not end. */
static void hold_after(const char *report_to)
{
    struct pollfd p[HOLD_MAX + 1];
    char scratch[4096];
    int open = hold.n, n = hold.n, cfd;

    if (hold.n == 0)
        return;
    if (fork() != 0) {
        for (int k = 0; k < hold.n; k++)
            close(hold.fds[k]);
        return;
    }
    signal(SIGTERM, SIG_DFL);
    cfd = hold_dial(report_to);
    if (cfd < 0)
        _exit(0);
    for (int k = 0; k < hold.n; k++)
        p[k] = (struct pollfd){ .fd = hold.fds[k], .events = POLLIN };
    p[n++] = (struct pollfd){ .fd = cfd, .events = POLLIN };
    while (open > 0) {
        if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
            break;
        for (int k = 0; k < n; k++) {
            if (p[k].fd < 0 || p[k].revents == 0)
                continue;
            if ((p[k].revents & (POLLHUP | POLLERR)) ||
                read(p[k].fd, scratch, sizeof(scratch)) <= 0) {
                if (p[k].fd == cfd)
                    _exit(0);
                close(p[k].fd);
                p[k].fd = -1;
                open--;
            }
        }
    }
    _exit(0);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: ftw-supervise [--status-dir DIR] [--preload LIB] "
            "[--save-env VAR]... [--report-to ADDR[,ADDR...]:PORT] "
            "[--hold-pmix] "
            "-- app [args...]\n"
            "       ftw-supervise --collect DIR\n");
    exit(2);
}

/* "KILL" for SIGKILL; a number for signals without a well-known name. */
static const char *signame(int sig, char *buf, size_t len)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "HUP"},   {SIGINT, "INT"},       {SIGQUIT, "QUIT"},
        {SIGILL, "ILL"},   {SIGTRAP, "TRAP"},     {SIGABRT, "ABRT"},
        {SIGBUS, "BUS"},   {SIGFPE, "FPE"},       {SIGKILL, "KILL"},
        {SIGUSR1, "USR1"}, {SIGSEGV, "SEGV"},     {SIGUSR2, "USR2"},
        {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"},     {SIGTERM, "TERM"},
        {SIGSTKFLT, "STKFLT"}, {SIGCHLD, "CHLD"}, {SIGCONT, "CONT"},
        {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"},     {SIGTTIN, "TTIN"},
        {SIGTTOU, "TTOU"}, {SIGURG, "URG"},       {SIGXCPU, "XCPU"},
        {SIGXFSZ, "XFSZ"}, {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"},
        {SIGWINCH, "WINCH"}, {SIGIO, "IO"},       {SIGPWR, "PWR"},
        {SIGSYS, "SYS"},
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].sig == sig)
            return names[i].name;
    if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        snprintf(buf, len, "RTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(buf, len, "%d", sig);
    return buf;
}

/* The rank this process runs, or NULL if no launcher variable names it. */
static const char *rank_of_env(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                 "PMIX_RANK", "SLURM_PROCID"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);

        if (v && *v && strspn(v, "0123456789") == strlen(v))
            return v;
    }
    return NULL;
}

/* Write DIR/NAME atomically (temporary file + rename), so a reader never
 * sees a half-written line. */
static void write_file(const char *dir, const char *name, const char *line)
{
    char path[4096], tmp[4096];
    int fd, n;

    n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return;
    n = snprintf(tmp, sizeof(tmp), "%s/.%s.%ld", dir, name, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp))
        return;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "ftw-supervise: %s: %s\n", tmp, strerror(errno));
        return;
    }
    size_t len = strlen(line), off = ftw_write_all(fd, line, len);

    if (close(fd) != 0 || off != len || rename(tmp, path) != 0) {
        fprintf(stderr, "ftw-supervise: cannot write %s: %s\n", path,
                strerror(errno));
        unlink(tmp);
    }
}

/* ---- records over TCP ---------------------------------------------------- */

/* Send one record line to spec, or say why not. */
static int send_record(const char *spec, const char *line)
{
    if (ftw_record_send(spec, line) == 0)
        return 0;
    fprintf(stderr, "ftw-supervise: cannot reach ftwrun at %s\n", spec);
    return -1;
}

/* Where this supervisor's records go. */
typedef struct {
    const char *dir;        /* DIR, when it exists on this host */
    const char *report_to;  /* else this, when given */
} sink_t;

static void write_status(const sink_t *sk, const char *line)
{
    const char *rank = rank_of_env();
    char rec[256];

    if (!rank) {
        fprintf(stderr, "ftw-supervise: no rank in the environment "
                        "(OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, "
                        "SLURM_PROCID); status not written\n");
        return;
    }
    if (sk->dir != NULL) {
        write_file(sk->dir, rank, line);
    } else if (sk->report_to != NULL) {
        snprintf(rec, sizeof(rec), "fate %s %s", rank, line);
        send_record(sk->report_to, rec);
    }
}

/* "start <rank> <host>": where the rank runs, for a host-wide loss. */
static void send_start(const sink_t *sk)
{
    const char *rank = rank_of_env();
    char host[256], rec[384];

    if (sk->dir != NULL || sk->report_to == NULL || rank == NULL)
        return;
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(rec, sizeof(rec), "start %s %s\n", rank, host);
    send_record(sk->report_to, rec);
}

/* ---- the collector --------------------------------------------------------- */

static volatile sig_atomic_t collect_stop, collect_release;

static void on_stop(int sig)
{
    (void)sig;
    collect_stop = 1;
}

static void on_release(int sig)
{
    (void)sig;
    collect_release = 1;
}

/* A record line from a remote supervisor: write the file it stands for.
 * Only ranks (digits) and printable statuses are taken. */
static void collect_line(const char *dir, char *line)
{
    char *kind, *rank, *rest, *save = NULL, name[64], out[256];

    kind = strtok_r(line, " ", &save);
    rank = strtok_r(NULL, " ", &save);
    rest = strtok_r(NULL, "\n", &save);
    if (kind == NULL || rank == NULL || rest == NULL || !*rank ||
        strspn(rank, "0123456789") != strlen(rank) || strlen(rank) > 12)
        return;
    for (char *c = rest; *c; c++)
        if (*c < 0x21 || *c > 0x7e)
            return;
    snprintf(out, sizeof(out), "%s\n", rest);
    if (strcmp(kind, "fate") == 0) {
        write_file(dir, rank, out);
    } else if (strcmp(kind, "failed") == 0) {
        snprintf(name, sizeof(name), "failed.%s", rank);
        write_file(dir, name, out);
    } else if (strcmp(kind, "start") == 0) {
        snprintf(name, sizeof(name), "host.%s", rank);
        write_file(dir, name, out);
    }
}

#define COLLECT_MAX 256

static int collect(const char *dir)
{
    struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
                               .sin6_addr = IN6ADDR_ANY_INIT };
    struct sockaddr_in a4 = { .sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_ANY) };
    struct pollfd pf[COLLECT_MAX + 1];
    char buf[COLLECT_MAX][256];
    size_t fill[COLLECT_MAX];
    int held[COLLECT_MAX];
    socklen_t alen;
    int lfd, n = 0, off = 0, port, idle = 0;
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_release;
    sigaction(SIGUSR1, &sa, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* Both families on one socket where IPv6 exists, else IPv4. */
    lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd >= 0 && (setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &off,
                                sizeof(off)) != 0 ||
                     bind(lfd, (struct sockaddr *)&a6, sizeof(a6)) != 0)) {
        close(lfd);
        lfd = -1;
    }
    if (lfd < 0) {
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a4, sizeof(a4)) != 0) {
            perror("ftw-supervise: collector socket");
            return 1;
        }
    }
    if (listen(lfd, 128) != 0) {
        perror("ftw-supervise: listen");
        return 1;
    }
    alen = sizeof(a6);
    if (getsockname(lfd, (struct sockaddr *)&a6, &alen) != 0) {
        perror("ftw-supervise: getsockname");
        return 1;
    }
    port = ntohs(((struct sockaddr *)&a6)->sa_family == AF_INET6
                 ? a6.sin6_port : ((struct sockaddr_in *)&a6)->sin_port);
    printf("%d\n", port);
    fflush(stdout);

    /* Close connection i (pf[i], buf[i - 1]): the last takes its place. */
#define DROP(i)                                                        \
    do {                                                               \
        close(pf[i].fd);                                               \
        pf[i] = pf[n];                                                 \
        memcpy(buf[(i) - 1], buf[n - 1], sizeof(buf[0]));              \
        fill[(i) - 1] = fill[n - 1];                                   \
        held[(i) - 1] = held[n - 1];                                   \
        n--;                                                           \
    } while (0)

    /* After SIGTERM: keep going until nothing arrived for 0.2 s. */
    while (!collect_stop || idle < 2) {
        int got;

        pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        got = poll(pf, (nfds_t)n + 1, 100);
        if (got < 0 && errno != EINTR)
            break;
        idle = got > 0 ? 0 : idle + (collect_stop ? 1 : 0);
        for (int i = n; i >= 1 && collect_release; i--)
            if (held[i - 1])
                DROP(i);
        if (got <= 0)
            continue;
        for (int i = n; i >= 1; i--) {
            ssize_t r;
            char *nl;

            if (!pf[i].revents)
                continue;
            if (held[i - 1])
                r = read(pf[i].fd, buf[i - 1], sizeof(buf[0]));
            else
                r = read(pf[i].fd, buf[i - 1] + fill[i - 1],
                         sizeof(buf[0]) - 1 - fill[i - 1]);
            if (r > 0 && held[i - 1])
                continue;           /* nothing more is expected */
            if (r > 0) {
                fill[i - 1] += (size_t)r;
                buf[i - 1][fill[i - 1]] = '\0';
                if ((nl = strchr(buf[i - 1], '\n')) == NULL &&
                    fill[i - 1] < sizeof(buf[0]) - 1)
                    continue;
                /* A holder's connection stays open until the release. */
                if (strncmp(buf[i - 1], "hold ", 5) == 0 && !collect_release) {
                    held[i - 1] = 1;
                    continue;
                }
                collect_line(dir, buf[i - 1]);
            }
            /* One record per connection: done with it. */
            DROP(i);
        }
        if ((pf[0].revents & POLLIN) && n < COLLECT_MAX) {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

            if (fd >= 0) {
                n++;
                pf[n] = (struct pollfd){ .fd = fd, .events = POLLIN };
                fill[n - 1] = 0;
                held[n - 1] = 0;
            }
        }
    }
#undef DROP
    return 0;
}

static void save_env(const char *dir, const char *var)
{
    const char *v = getenv(var);
    char name[256], *line;
    size_t len;
    int n;

    if (!v || strchr(var, '/'))
        return;
    n = snprintf(name, sizeof(name), "env.%s", var);
    if (n < 0 || (size_t)n >= sizeof(name))
        return;
    len = strlen(v) + 2;
    line = malloc(len);
    if (!line)
        return;
    snprintf(line, len, "%s\n", v);
    write_file(dir, name, line);
    free(line);
}

static void child(char **argv, const char *preload, const char *report_to,
                  pid_t parent, const sigset_t *oldmask)
{
    struct sigaction sa;

    /* Die with the supervisor.  If it died before prctl took effect we
     * have already been reparented: give up now. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFWD; i++)
        sigaction(fwd_signals[i], &sa, NULL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);

    if (report_to != NULL)
        setenv("FTW_REPORT_TO", report_to, 1);
    if (preload && *preload) {
        const char *old = getenv("LD_PRELOAD");

        if (old && *old) {
            size_t len = strlen(preload) + strlen(old) + 2;
            char *v = malloc(len);

            if (!v)
                _exit(127);
            snprintf(v, len, "%s:%s", preload, old);
            setenv("LD_PRELOAD", v, 1);
            free(v);
        } else {
            setenv("LD_PRELOAD", preload, 1);
        }
    }

    execvp(argv[0], argv);
    fprintf(stderr, "ftw-supervise: cannot run %s: %s\n", argv[0],
            strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

int main(int argc, char **argv)
{
    const char *status_dir = NULL, *preload = NULL, *report_to = NULL;
    sink_t sink = { NULL, NULL };
    struct stat sb;
    const char *save[16];
    int nsave = 0;
    struct sigaction sa;
    sigset_t block, oldmask;
    pid_t pid, parent;
    int i, status, code, hold_pmix = 0;
    char line[64], buf[32];

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--status-dir") == 0 && i + 1 < argc) {
            status_dir = argv[++i];
        } else if (strncmp(argv[i], "--status-dir=", 13) == 0) {
            status_dir = argv[i] + 13;
        } else if (strcmp(argv[i], "--preload") == 0 && i + 1 < argc) {
            preload = argv[++i];
        } else if (strncmp(argv[i], "--preload=", 10) == 0) {
            preload = argv[i] + 10;
        } else if (strcmp(argv[i], "--report-to") == 0 && i + 1 < argc) {
            report_to = argv[++i];
        } else if (strcmp(argv[i], "--hold-pmix") == 0) {
            hold_pmix = 1;
        } else if (strcmp(argv[i], "--collect") == 0 && i + 1 < argc) {
            return collect(argv[i + 1]);
        } else if (strcmp(argv[i], "--save-env") == 0 && i + 1 < argc) {
            if (nsave == (int)(sizeof(save) / sizeof(save[0])))
                usage();
            save[nsave++] = argv[++i];
        } else if (argv[i][0] == '-') {
            usage();
        } else {
            break;
        }
    }
    if (i >= argc)
        usage();
    /* The status directory is ftwrun's, on ftwrun's host: on another
     * host the records go over TCP. */
    if (status_dir != NULL && stat(status_dir, &sb) == 0 &&
        S_ISDIR(sb.st_mode))
        sink.dir = status_dir;
    else
        status_dir = NULL;
    sink.report_to = report_to;
    send_start(&sink);
    if (status_dir) {
        char name[64];

        snprintf(name, sizeof(name), "pid.%ld", (long)getpid());
        write_file(status_dir, name, "\n");
        for (int k = 0; k < nsave; k++)
            save_env(status_dir, save[k]);
    }

    /* Block the forwarded signals across fork, so one arriving before
     * child_pid is known stays pending and is forwarded afterwards. */
    sigemptyset(&block);
    for (size_t k = 0; k < NFWD; k++)
        sigaddset(&block, fwd_signals[k]);
    sigprocmask(SIG_BLOCK, &block, &oldmask);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    for (size_t k = 0; k < NFWD; k++)
        sigaction(fwd_signals[k], &sa, NULL);

    parent = getpid();
    pid = fork();
    if (pid < 0) {
        perror("ftw-supervise: fork");
        return 126;
    }
    if (pid == 0)
        child(argv + i, preload, report_to, parent, &oldmask);

    child_pid = pid;
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    if (status_dir) {
        char name[64], line[32];

        snprintf(name, sizeof(name), "pid.%ld", (long)parent);
        snprintf(line, sizeof(line), "%ld\n", (long)pid);
        write_file(status_dir, name, line);
    }

    if (hold_pmix)
        hold.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    for (;;) {
        pid_t r = hold.pidfd >= 0 ? hold_wait(pid, &status)
                                  : waitpid(pid, &status, 0);

        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            perror("ftw-supervise: waitpid");
            return 126;
        }
    }
    child_pid = 0;

    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);

        snprintf(line, sizeof(line), "signal:%s\n",
                 signame(sig, buf, sizeof(buf)));
        code = 128 + sig;
    } else {
        code = WEXITSTATUS(status);
        snprintf(line, sizeof(line), "exit:%d\n", code);
    }
    write_status(&sink, line);
    if (code != 0)
        hold_after(report_to);
    return code;
}
