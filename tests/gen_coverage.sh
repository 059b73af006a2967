#!/bin/sh
# ftw-test: mode=script
# The generator covers the MPI: every MPI_/MPIX_ function a libmpi exports
# is exported (interposed) by that MPI's libftwrap.so, except the symbols
# gen/rules.py lists with a reason; and the generator's output is
# deterministic.  Run from the top of the tree with MPIS="openmpi mpich".
exec python3 - "$@" <<'PY'
import os, re, subprocess, sys, tempfile, filecmp
sys.path.insert(0, "gen")
import rules, ftwgen

mpis = os.environ.get("MPIS", "openmpi mpich").split()
n = 0
failed = 0
print("1..%d" % (3 * len(mpis) + 2))

def ok(cond, msg):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print("%sok %d - %s" % ("" if cond else "not ", n, msg))

def functions(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return {f[2] for f in (l.split() for l in out.splitlines())
            if len(f) == 3 and f[1] in "TWi" and re.match(r"MPIX?_", f[2])}

not_calls = [(re.compile(p + "$"), why) for p, why in rules.NOT_CALLS.items()]
for m in mpis:
    cc = "mpicc." + m
    mpi_syms = set()
    ours = functions("build/%s/libftwrap.so" % m)
    # the libmpi functions themselves
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "p.c"); exe = os.path.join(tmp, "p")
        open(src, "w").write("#include <mpi.h>\nint main(void){return MPI_Init(0,0);}\n")
        subprocess.run([cc, src, "-o", exe], check=True)
        ldd = subprocess.run(["ldd", exe], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout
    for lib in re.findall(r"=>\s*(\S*libmpi\w*\.so\S*)", ldd):
        mpi_syms |= functions(lib)
    missing = []
    for s in sorted(mpi_syms - ours):
        if s in rules.EXCLUDED:
            continue
        if any(rx.match(s) for rx, _ in not_calls):
            continue
        missing.append(s)
    for s in missing:
        print("# %s: %s is exported by libmpi but not interposed" % (m, s))
    ok(not missing, "%s: every exported MPI function is interposed or "
       "listed with a reason (%d of %d interposed)"
       % (m, len(mpi_syms & ours), len(mpi_syms)))
    extra = sorted(s for s in ours if not re.match(r"(MPIX?|FTW)_", s))
    ok(not extra and all(why for why in list(rules.EXCLUDED.values()) +
                         [w for _, w in not_calls]),
       "%s: libftwrap.so exports only MPI_/MPIX_/FTW_ names" % m)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        for d in (a, b):
            subprocess.run([sys.executable, "gen/ftwgen.py", "--cc", cc,
                            "--out", d], check=True)
        files = sorted(os.listdir(a))
        same = files == sorted(os.listdir(b)) and \
            all(filecmp.cmp(os.path.join(a, f), os.path.join(b, f),
                            shallow=False) for f in files)
        banner = all("AUTO-GENERATED" in open(os.path.join(a, f)).read()
                     for f in files if f.endswith((".c", ".h")))
    ok(same and banner, "%s: generator output is deterministic and "
       "carries the AUTO-GENERATED banner" % m)
# The generator refuses what it does not understand, naming it.
fake = ftwgen.Func("int", "MPI_Brand_new_call", [], False)
try:
    ftwgen.classify({fake.name: fake}, {"PMPI_Brand_new_call"},
                    {"PMPI_Brand_new_call"})
    msg = ""
except ftwgen.GenError as e:
    msg = str(e)
ok("MPI_Brand_new_call" in msg, "a function without a rule stops the "
   "generator, naming it")
try:
    ftwgen.parse("int MPI_Odd(int x) [[3]];")
    msg = ""
except ftwgen.GenError as e:
    msg = str(e)
ok("MPI_Odd" in msg, "a prototype the generator cannot parse stops it, "
   "naming it")
sys.exit(1 if failed else 0)
PY
