/* MPI_Init and MPI_Finalize under ftwrap. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftwrap.h"
#include "recover/agree.h"
#include "recover/recover.h"
#include "core/comm.h"
#include "core/ctl.h"
#include "core/events.h"
#include "core/revoke.h"
#include "core/ft.h"
#include "core/lock.h"
#include "op/op.h"
#include "p2p/bsend.h"
#include "core/request.h"
#include "ulfm/ulfm.h"
#include "winfile/file.h"
#include "winfile/win.h"
#include "core/xjob.h"
#include "buf/bounce.h"
#include "buf/quarantine.h"
#include "rndv/p2p_rndv.h"
#include "rndv/stash.h"
#include "rndv/rndv.h"
#include "util/config.h"
#include "util/log.h"
#include "util/stats.h"
#include "xport/xport.h"

static int world_rank = -1;

#ifdef FTW_TSAN
#include <dlfcn.h>
#include <link.h>

/* The ThreadSanitizer build (make tsan): scripts/tsan.supp ignores what
 * the MPI's component libraries do by library (called_from_lib), and
 * ThreadSanitizer stops when such a library is unloaded, which Open MPI
 * (and PMIx) do to their components in MPI_Finalize.  The components
 * loaded (mca_*.so, pmix_mca_*.so) stay to the end. */
static int pin_component(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "mca_") != NULL)
        dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

static void pin_components(void)
{
    dl_iterate_phdr(pin_component, NULL);
}
#else
static void pin_components(void)
{
}
#endif

/* The classes ftwrap registers at MPI_Init, in this order, so that they
 * get the constant values ftwrap.h gives them.  On MPICH the failure
 * classes are MPICH's own MPIX_ classes and need no registering. */
static const struct {
    int code;
    const char *name;
} err_classes[] = {
#if defined(OPEN_MPI)
    { FTW_ERR_PROC_FAIL_STOP, "FTW_ERR_PROC_FAIL_STOP" },
    { FTW_ERR_ANY_SOURCE_DISABLED, "FTW_ERR_ANY_SOURCE_DISABLED" },
#endif
    { FTW_ERR_DRAINED, "FTW_ERR_DRAINED" },
    { FTW_ERR_BUFFER_UNUSABLE, "FTW_ERR_BUFFER_UNUSABLE" },
    { FTW_ERR_INTERRUPTED, "FTW_ERR_INTERRUPTED" },
#if defined(OPEN_MPI)
    { MPIX_ERR_REVOKED, "MPIX_ERR_REVOKED" },
#endif
};

static void register_error_classes(void)
{
    for (size_t i = 0; i < FTW_ARRAY_SIZE(err_classes); i++) {
        int code;

        if (PMPI_Add_error_class(&code) != MPI_SUCCESS)
            ftw_fatal("MPI_Add_error_class failed for %s",
                      err_classes[i].name);
        if (code != err_classes[i].code)
            ftw_fatal("MPI_Add_error_class gave %s the value %d, but "
                      "ftwrap.h says %d: the program registered error "
                      "classes before ftwrap, or ftwrap was built for "
                      "another MPI", err_classes[i].name, code,
                      err_classes[i].code);
        PMPI_Add_error_string(code, ftw_error_text(code));
    }
}

/* Open MPI's mpirun removes a job's session directory when one of its
 * processes dies, at a moment of its own, and the sm shared-file-pointer
 * component keeps a file there: a collective MPI_File_open during which
 * some processes find the directory and others do not leaves the first
 * waiting in the component's barrier for good.  Unless the user names the
 * components, that one is left out (the locked-file one, whose lock file
 * lies beside the file, takes its place).  Read by the MPI's MPI_Init. */
void ftw_init_before(void)
{
#if defined(OPEN_MPI)
    setenv("OMPI_MCA_sharedfp", "^sm", 0);     /* 0: the user's stays */
#endif
}

/* FTW_INITIAL_ERRHANDLER: MPI-4's initial error handler, on the two
 * predefined communicators, and its name in MPI_INFO_ENV as an MPI that
 * has it would say. */
static void initial_errhandler(void)
{
    int choice = ftw_cfg.initial_errhandler;
    MPI_Errhandler eh = MPI_ERRORS_ARE_FATAL;

    if (choice == FTW_ERRH_NONE)
        return;
    if (choice == FTW_ERRH_RETURN)
        eh = MPI_ERRORS_RETURN;
#if defined(MPI_ERRORS_ABORT)
    else if (choice == FTW_ERRH_ABORT)
        eh = MPI_ERRORS_ABORT;
#endif
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
    if (PMPI_Info_set(MPI_INFO_ENV, "mpi_initial_errhandler",
                      ftw_errh_names[choice]) != MPI_SUCCESS)
        ftw_debug("MPI_INFO_ENV does not take mpi_initial_errhandler");
}

/* Under ftwrun the MPI started ftwrap's supervisor, which then ran the
 * program: Open MPI's MPI_INFO_ENV names the supervisor and its options
 * as "command" and "argv", and a program that spawns copies of itself
 * from them (MPI_Comm_spawn(command, ...)) would spawn the supervisor.
 * They are set as the MPI sets them for a program it started itself: the
 * base name of argv[0], and the other arguments joined by spaces. */
static void info_env_command(void)
{
    static const char sup[] = "ftw-supervise";
    char cmd[MPI_MAX_INFO_VAL + 1] = "", *args = NULL, *base;
    size_t len = 0, cmdlen;
    ssize_t n;
    int flag = 0;
    FILE *f;

    if (PMPI_Info_get(MPI_INFO_ENV, "command", MPI_MAX_INFO_VAL, cmd,
                      &flag) != MPI_SUCCESS || !flag)
        return;
    cmdlen = strlen(cmd);
    if (cmdlen < sizeof(sup) - 1 ||
        strcmp(cmd + cmdlen - (sizeof(sup) - 1), sup) != 0)
        return;
    if ((f = fopen("/proc/self/cmdline", "r")) == NULL)
        return;
    n = getdelim(&args, &len, 0, f);    /* argv[0] */
    if (n > 0) {
        base = strrchr(args, '/');
        PMPI_Info_set(MPI_INFO_ENV, "command", base ? base + 1 : args);
    }
    free(args);
    args = NULL;
    len = 0;
    /* The rest: NUL-separated arguments, joined by spaces. */
    n = getdelim(&args, &len, EOF, f);
    fclose(f);
    if (n > 0) {
        for (ssize_t i = 0; i + 1 < n; i++)
            if (args[i] == '\0')
                args[i] = ' ';
        PMPI_Info_set(MPI_INFO_ENV, "argv", args);
    } else if (PMPI_Info_get_valuelen(MPI_INFO_ENV, "argv", &(int){ 0 },
                                      &flag) == MPI_SUCCESS && flag) {
        PMPI_Info_delete(MPI_INFO_ENV, "argv");
    }
    free(args);
}

static void released_failhandler(MPI_Comm comm, uint64_t id)
{
    ftw_failhandler_forget(comm);
}

static void released_agree(MPI_Comm comm, uint64_t id)
{
    ftw_agree_comm_freed(id);
}

static void rndv_progress(void)
{
    ftw_rndv_progress_recvs();
    ftw_rndv_progress();
}

static const ftw_progress_ops_t progress_steps[] = {
    { "rendezvous", rndv_progress, &ftw_rndv_on, 16, 1 },
    { "validate", ftw_validate_progress, &ftw_validates_pending, 1, 1 },
    { "drain sink", ftw_drain_sink_progress, &ftw_drain_sinks, 16, 1 },
};

static void comm_untracked(MPI_Comm user)
{
    ftw_stash_drop(user, MPI_ANY_SOURCE, 1);
}

static const ftw_comm_ops_t comm_ops = {
    .untracked = comm_untracked,
    .freed = ftw_drain_sink_forget,
};

static const ftw_req_ops_t req_ops = {
    .range_release = ftw_quarantine_release,
    .ranges_released = ftw_bounce_progress,
    .owned_free = ftw_rndv_owned_free,
};

static const ftw_op_rndv_ops_t op_rndv_ops = {
    .finish = ftw_rndv_finish,
    .finish_raise = ftw_rndv_finish_raise,
    .send_settle = ftw_rndv_send_settle,
};

/* The subsystems above core subscribe to core's events and hooks. */
static void subscribe(void)
{
    ftw_comm_ops_set(&comm_ops);
    ftw_req_ops_set(&req_ops);
    ftw_op_rndv_ops_set(&op_rndv_ops);
    ftw_on_failure(ftw_agree_failure_seen);
    ftw_on_failure(ftw_revoke_failure_seen);
    ftw_on_failure(ftw_failhandlers_run);
    ftw_on_comm_released(released_failhandler);
    ftw_on_comm_released(released_agree);
    for (size_t i = 0; i < FTW_ARRAY_SIZE(progress_steps); i++)
        ftw_progress_register(&progress_steps[i]);
}

int ftw_init_after(int rc)
{
    if (rc != MPI_SUCCESS)
        return rc;
    ftw_config_load();
    ftw_req_init();
    subscribe();
    {
        int level = MPI_THREAD_SINGLE;

        PMPI_Query_thread(&level);
        ftw_threaded = level == MPI_THREAD_MULTIPLE;
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    ftw_log_set_rank(world_rank);
    register_error_classes();
    initial_errhandler();
    info_env_command();
    if (ftw_inject_init(world_rank) != FTW_OK)
        ftw_fatal("FTW_INJECT='%s' is not valid", ftw_cfg.inject);
    if (ftw_inject_armed)
        ftw_noisy++;        /* injection counts calls on the watched path */
    if (ftw_detect_init() != FTW_OK)
        ftw_error("the failure detector could not start: failures of "
                  "other processes will not be noticed (see the messages "
                  "above)");
    if (ftw_threaded && ftw_idle_sleep && ftw_cfg.idle == FTW_IDLE_AUTO) {
        /* Threads that wait share the MPI's progress: one sleeping
         * between polls holds up the transfers the others wait for (a
         * thread per peer exchanging large messages ran minutes instead
         * of seconds on an oversubscribed host). */
        ftw_idle_sleep = 0;
        ftw_debug("MPI_THREAD_MULTIPLE: waiting calls spin");
    }
    ftw_fast_wait_init();

    if (ftw_rndv_init() != FTW_OK)
        ftw_error("the rendezvous could not start: large messages go "
                  "through the MPI (see the messages above)");
    if (ftw_ctl_init() != MPI_SUCCESS)
        ftw_error("no control channel: agreements, revocation and the "
                  "finalize barrier will not work");
    ftw_comm_track(MPI_COMM_WORLD, FTW_COMM_ID_WORLD, NULL);
    ftw_comm_track(MPI_COMM_SELF, FTW_COMM_ID_SELF, NULL);
    {
        MPI_Comm parent = MPI_COMM_NULL;

        /* A spawned process: the spawner's side of this exchange ends
         * its MPI_Comm_spawn (coll.c). */
        if (PMPI_Comm_get_parent(&parent) == MPI_SUCCESS)
            ftw_xjob_exchange(parent, "MPI_Init (the spawning job)");
    }
    if (ftw_cfg.print_config && world_rank == 0)
        ftw_config_print(stdout);
    ftw_running = 1;
    pin_components();
    ftw_info("ftwrap %d.%d active", FTWRAP_VERSION_MAJOR,
             FTWRAP_VERSION_MINOR);
    return MPI_SUCCESS;
}

int ftw_finalize(void)
{
    int rc;

    if (!ftw_running)
        return PMPI_Finalize();
    pin_components();
    ftw_bsend_fini();   /* the implicit detach */
    if (ftw_cfg.stats)
        ftw_stats_print(stdout, world_rank);
    ftw_running = 0;
    ftw_rndv_fini();
    ftw_rndv_split_fini();
    ftw_fast_wait_fini();
    ftw_agree_fini();
    ftw_type_fini();
    ftw_xjob_fini();
    rc = ftw_finalize_run(ftw_ctl_comm, world_rank);
    ftw_detect_fini();
    ftw_win_table_clear();
    ftw_file_table_clear();
    ftw_comm_table_clear();
    ftw_ctl_fini();
    return rc;
}

FTW_EXPORT int FTW_Initialized(int *flag)
{
    if (flag == NULL)
        return MPI_ERR_ARG;
    *flag = ftw_running;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Stat_get(const char *key, unsigned long long *value)
{
    uint64_t v;

    if (key == NULL || value == NULL || ftw_stats_lookup(key, &v) != 0)
        return MPI_ERR_ARG;
    *value = (unsigned long long)v;
    return MPI_SUCCESS;
}

FTW_EXPORT int FTW_Verbs_reread(int world_rank, int *refused)
{
    int r = 0;

    if (!ftw_cfg.verbs_debug) {
        ftw_error("FTW_Verbs_reread needs FTW_VERBS_DEBUG=1");
        return MPI_ERR_OTHER;
    }
    if (refused == NULL || !ftw_running)
        return MPI_ERR_ARG;
    switch (ftw_xport_verbs_reread(world_rank, &r)) {
    case FTW_OK:
        *refused = r;
        return MPI_SUCCESS;
    case FTW_ST_PEER_FAILED:
        return FTW_ERR_PROC_FAIL_STOP;
    default:
        return MPI_ERR_ARG;
    }
}
