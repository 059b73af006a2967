#!/bin/sh
# ftw-test: mode=script
# The library's folders are layers (Makefile's LIB_DIRS, lowest first):
# no object calls a folder above its own, no source includes a header of
# one above, and every folder of src/ but tools is built.  Run from the
# top of the tree with MPIS and LIB_DIRS.
mpis=${MPIS:-openmpi mpich}
dirs=${LIB_DIRS:?LIB_DIRS: the Makefile passes the folders in layer order}
n=0
st=0
set -- $mpis
echo "1..$(($# + 1))"
for m in $mpis; do
  n=$((n + 1))
  out=$(scripts/layering "build/$m/obj" $dirs 2>&1)
  if [ $? -eq 0 ]; then
    echo "ok $n - $m: no folder calls one above it ($(echo "$out" | head -1))"
  else
    echo "not ok $n - $m: layering errors"; st=1
    echo "$out" | sed 's/^/# /'
  fi
done
n=$((n + 1))
missing=
for d in src/*/; do
  d=$(basename "$d")
  [ "$d" = tools ] && continue
  case " $dirs " in *" $d "*) ;; *) missing="$missing $d" ;; esac
done
if [ -z "$missing" ]; then
  echo "ok $n - every folder of src/ is a layer of the library"
else
  echo "not ok $n - folders not in LIB_DIRS (not built):$missing"; st=1
fi
exit $st
