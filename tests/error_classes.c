/* ftw-test: np=2 mode=ftwrap timeout=60 */
/*
 * error_classes - ftwrap's error classes are registered MPI error classes.
 *
 * Asserts, on every rank, that the five classes of ftwrap.h
 * (FTW_ERR_PROC_FAIL_STOP, FTW_ERR_ANY_SOURCE_DISABLED, FTW_ERR_DRAINED,
 * FTW_ERR_BUFFER_UNUSABLE, FTW_ERR_INTERRUPTED) and MPIX_ERR_REVOKED are
 * distinct; that the failure classes are ULFM's (FTW_ERR_PROC_FAIL_STOP
 * is MPIX_ERR_PROC_FAILED, FTW_ERR_ANY_SOURCE_DISABLED is
 * MPIX_ERR_PROC_FAILED_PENDING, on MPICH MPICH's own values from mpi.h);
 * that the classes ftwrap registers lie above MPI_ERR_LASTCODE and at or
 * below MPI_LASTUSEDCODE; that all six are their own class under
 * MPI_Error_class, take error codes from MPI_Add_error_code, and have
 * non-empty, pairwise distinct MPI_Error_string texts naming them that
 * differ from the MPI's texts for MPI_ERR_UNKNOWN and for a class nobody
 * described; that every rank sees the same values; and that a class the
 * program adds itself is new.  Runs under ftwrap only, which registers the
 * classes inside MPI_Init.
 */
#include "tap.h"
#include "mpi-ext.h"

#define PLAN 10
#define NCLASS 6

static int rank;

static const char *const names[NCLASS] = {
    "FTW_ERR_PROC_FAIL_STOP", "FTW_ERR_ANY_SOURCE_DISABLED",
    "FTW_ERR_DRAINED", "FTW_ERR_BUFFER_UNUSABLE", "FTW_ERR_INTERRUPTED",
    "MPIX_ERR_REVOKED",
};

/* Which of them ftwrap registers (MPICH has ULFM's three itself). */
#if defined(MPICH)
static const int registered[NCLASS] = { 0, 0, 1, 1, 1, 0 };
#else
static const int registered[NCLASS] = { 1, 1, 1, 1, 1, 1 };
#endif

static int classes[NCLASS];
static char strings[NCLASS][MPI_MAX_ERROR_STRING];

/* MPI_Error_string into buf; returns its return code, buf "" on error. */
static int error_string(int code, char *buf)
{
    int len = 0, rc;

    memset(buf, 0, MPI_MAX_ERROR_STRING);
    rc = MPI_Error_string(code, buf, &len);
    if (rc != MPI_SUCCESS)
        buf[0] = '\0';
    else if (len >= 0 && len < MPI_MAX_ERROR_STRING)
        buf[len] = '\0';
    return rc;
}

/* One class for "a process failed", whichever interface names it. */
static int test_ulfm_same(void)
{
    int ok = FTW_ERR_PROC_FAIL_STOP == MPIX_ERR_PROC_FAILED &&
             FTW_ERR_ANY_SOURCE_DISABLED == MPIX_ERR_PROC_FAILED_PENDING;
#if defined(MPICH)
    ok = ok && MPIX_ERR_PROC_FAILED == 101 &&
         MPIX_ERR_PROC_FAILED_PENDING == 102 && MPIX_ERR_REVOKED == 103;
#endif
    if (!ok)
        tap_diag("FTW_ERR_PROC_FAIL_STOP %d MPIX_ERR_PROC_FAILED %d "
                 "FTW_ERR_ANY_SOURCE_DISABLED %d MPIX_ERR_PROC_FAILED_PENDING "
                 "%d MPIX_ERR_REVOKED %d", FTW_ERR_PROC_FAIL_STOP,
                 MPIX_ERR_PROC_FAILED, FTW_ERR_ANY_SOURCE_DISABLED,
                 MPIX_ERR_PROC_FAILED_PENDING, MPIX_ERR_REVOKED);
    return ok;
}

static int test_own_class(void)
{
    int ok = 1;

    for (int i = 0; i < NCLASS; i++) {
        int cls = -1, rc = MPI_Error_class(classes[i], &cls);

        if (rc != MPI_SUCCESS || cls != classes[i]) {
            tap_diag("MPI_Error_class(%s = %d) gave rc %d class %d", names[i],
                     classes[i], rc, cls);
            ok = 0;
        }
    }
    return ok;
}

static int test_distinct_values(void)
{
    for (int i = 0; i < NCLASS; i++)
        for (int j = i + 1; j < NCLASS; j++)
            if (classes[i] == classes[j]) {
                tap_diag("%s and %s are both %d", names[i], names[j],
                         classes[i]);
                return 0;
            }
    return 1;
}

static int test_above_lastcode(void)
{
    int ok = 1;

    for (int i = 0; i < NCLASS; i++)
        if (registered[i] && classes[i] <= MPI_ERR_LASTCODE) {
            tap_diag("%s = %d is not above MPI_ERR_LASTCODE %d", names[i],
                     classes[i], MPI_ERR_LASTCODE);
            ok = 0;
        }
    return ok;
}

/* MPI_LASTUSEDCODE, or -1 when the attribute cannot be read. */
static int last_used_code(void)
{
    int *val = NULL, flag = 0;

    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &val, &flag)
        != MPI_SUCCESS || !flag || !val)
        return -1;
    return *val;
}

static int test_below_lastused(void)
{
    int last = last_used_code(), ok = last >= 0;

    for (int i = 0; ok && i < NCLASS; i++)
        if (registered[i] && classes[i] > last) {
            tap_diag("%s = %d is above MPI_LASTUSEDCODE %d", names[i],
                     classes[i], last);
            ok = 0;
        }
    return ok;
}

static int test_strings_nonempty(void)
{
    int ok = 1;

    for (int i = 0; i < NCLASS; i++) {
        int rc = error_string(classes[i], strings[i]);

        if (rc != MPI_SUCCESS || strstr(strings[i], names[i]) == NULL) {
            tap_diag("MPI_Error_string(%s) gave rc %d, \"%s\"", names[i], rc,
                     strings[i]);
            ok = 0;
        }
    }
    return ok;
}

static int test_strings_distinct(void)
{
    for (int i = 0; i < NCLASS; i++)
        for (int j = i + 1; j < NCLASS; j++)
            if (strcmp(strings[i], strings[j]) == 0) {
                tap_diag("%s and %s share the text \"%s\"", names[i],
                         names[j], strings[i]);
                return 0;
            }
    return 1;
}

/* 1 when none of the six texts equals text (an empty text never does). */
static int none_is(const char *text, const char *what)
{
    for (int i = 0; i < NCLASS; i++)
        if (text[0] != '\0' && strcmp(strings[i], text) == 0) {
            tap_diag("%s has the text of %s: \"%s\"", names[i], what, text);
            return 0;
        }
    return 1;
}

/*
 * The texts differ from the MPI's generic ones: that of MPI_ERR_UNKNOWN
 * and that of a class added here without MPI_Add_error_string; and the
 * added class is new.  No unregistered code is probed: MPICH 4.0.2
 * crashes in MPI_Error_string on one.  MPI_Error_class is not asked
 * about the added class: Open MPI 4.1.4 answers MPI_ERR_UNKNOWN for
 * classes from MPI_Add_error_class.
 */
static int test_not_generic(void)
{
    char unknown[MPI_MAX_ERROR_STRING], blank[MPI_MAX_ERROR_STRING];
    int ok, added = -1;

    if (error_string(MPI_ERR_UNKNOWN, unknown) != MPI_SUCCESS) {
        tap_diag("MPI_Error_string(MPI_ERR_UNKNOWN) failed");
        return 0;
    }
    ok = none_is(unknown, "MPI_ERR_UNKNOWN");

    if (MPI_Add_error_class(&added) != MPI_SUCCESS) {
        tap_diag("MPI_Add_error_class failed");
        return 0;
    }
    for (int i = 0; i < NCLASS; i++)
        if (added == classes[i]) {
            tap_diag("MPI_Add_error_class handed out %s again", names[i]);
            ok = 0;
        }
    error_string(added, blank);
    return none_is(blank, "a class without a text") && ok;
}

/* Each class takes a code from MPI_Add_error_code that maps back to it. */
static int test_add_code(void)
{
    int ok = 1;

    for (int i = 0; i < NCLASS; i++) {
        int code = -1, cls = -1;

        if (MPI_Add_error_code(classes[i], &code) != MPI_SUCCESS
            || MPI_Error_class(code, &cls) != MPI_SUCCESS
            || cls != classes[i]) {
            tap_diag("MPI_Add_error_code(%s) gave code %d of class %d",
                     names[i], code, cls);
            ok = 0;
        }
    }
    return ok;
}

/* Every rank holds rank 0's values of the six classes. */
static int test_same_everywhere(void)
{
    int root[NCLASS];

    memcpy(root, classes, sizeof root);
    if (MPI_Bcast(root, NCLASS, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 0;
    return memcmp(root, classes, sizeof root) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    tap_plan(PLAN);

    classes[0] = FTW_ERR_PROC_FAIL_STOP;
    classes[1] = FTW_ERR_ANY_SOURCE_DISABLED;
    classes[2] = FTW_ERR_DRAINED;
    classes[3] = FTW_ERR_BUFFER_UNUSABLE;
    classes[4] = FTW_ERR_INTERRUPTED;
    classes[5] = MPIX_ERR_REVOKED;

    tap_ok(test_distinct_values(), "the six error classes are distinct "
           "values");
    tap_ok(test_ulfm_same(), "FTW_ERR_PROC_FAIL_STOP is MPIX_ERR_PROC_FAILED "
           "and FTW_ERR_ANY_SOURCE_DISABLED is MPIX_ERR_PROC_FAILED_PENDING "
           "(MPICH: its own 101, 102, 103)");
    tap_ok(test_above_lastcode(), "every class ftwrap registers is above "
           "MPI_ERR_LASTCODE");
    tap_ok(test_below_lastused(), "MPI_LASTUSEDCODE is at least every "
           "class ftwrap registers");
    tap_ok(test_own_class(), "MPI_Error_class maps every ftwrap class to "
           "itself");
    tap_ok(test_same_everywhere(), "every rank has the same ftwrap class "
           "values");
    tap_ok(test_strings_nonempty(), "MPI_Error_string gives every class a "
           "text that names it");
    tap_ok(test_strings_distinct(), "the six texts are pairwise distinct");
    tap_ok(test_not_generic(), "no text is the MPI's text for "
           "MPI_ERR_UNKNOWN or for a class without a text, and a class added "
           "afterwards is new");
    tap_ok(test_add_code(), "MPI_Add_error_code on every ftwrap class gives "
           "a code of that class");

    MPI_Finalize();
    return tap_status();
}
