#!/usr/bin/env bash
# ftw-test: mode=script
# The installed ftwrap as the README tells a user to use it.
#
# `make install` into a scratch prefix; then, per MPI, a ULFM program that
# includes only <mpi.h> and <mpi-ext.h> and calls every ULFM function
# (tests/install/ulfm_calls.c) builds with the README's line,
# `mpicc $(pkg-config --cflags --libs ftwrap-<mpi>)`, and runs under the
# installed ftwrun on 2 ranks: each of its checks is one TAP line here.
# Nothing is left in the prefix's place afterwards.
# Run from the top of the tree with MPIS="openmpi mpich".
set -u
top=$(pwd)
mpis=${MPIS:-openmpi mpich}
work=$(mktemp -d "${TMPDIR:-/tmp}/ftw_install.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
n=0 failed=0
ok() { # STATUS MESSAGE
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"
    else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}

make -s -C "$top" install PREFIX="$work/prefix" MPIS="$mpis" \
    >"$work/install.log" 2>&1
ok $? "make install PREFIX=<scratch>"
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
for m in $mpis; do
    # shellcheck disable=SC2046
    "mpicc.$m" "$top/tests/install/ulfm_calls.c" -o "$work/ulfm_calls-$m" \
        $(pkg-config --cflags --libs "ftwrap-$m") >"$work/cc-$m.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || sed 's/^/# /' "$work/cc-$m.log"
    ok $rc "$m: every ULFM call links with mpicc \$(pkg-config --cflags --libs ftwrap-$m)"
    [ $rc -eq 0 ] || continue
    (cd "$work" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 60 "$work/prefix/bin/ftwrun" -np 2 --mpi "$m" \
        "$work/ulfm_calls-$m") >"$work/run-$m.log" 2>&1
    rc=$?
    while read -r line; do
        case $line in
        "ok - "*) ok 0 "$m: ${line#ok - }" ;;
        "not ok - "*) ok 1 "$m: ${line#not ok - }" ;;
        esac
    done <"$work/run-$m.log"
    [ $rc -eq 0 ] || sed 's/^/# /' "$work/run-$m.log"
    ok $rc "$m: the program exits 0 under the installed ftwrun"
done
echo "1..$n"
[ $failed -eq 0 ]
