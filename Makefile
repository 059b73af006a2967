# ftwrap: one library per installed MPI (Open MPI and MPICH differ in ABI).
#
#   make            build build/<mpi>/libftwrap.so for every installed MPI,
#                   the tools in build/bin and the tests
#   make check      install what is missing (scripts/setup), build, run the
#                   TAP suite for every MPI, natively and under ftwrap
#   make demo       a short 4-rank run under ftwrun on each MPI
#   make bench      scripts/bench/run (native vs ftwrap ratios)
#   make stress     repeat the drain/quarantine kill scenarios (scripts/stress;
#                   STRESS_N=20 runs each), count hangs and corruptions
#   make verbs-lab-smoke  soft-RoCE VM check (scripts/verbs-lab; needs
#                   scripts/setup --lab): rxe0 and an RC ping-pong, both MTUs
#   make check-rndv-1k  the transparency tests (p2p_*, rndv_*) under ftwrap
#                   with the rendezvous threshold forced down to 1 KiB
#   make check-verbs  the rendezvous tests over ftwrap's verbs transport in
#                   the soft-RoCE VM, both MPIs, MTU 4096 (ODP) and 1024
#   make tsan       ThreadSanitizer build of ftwrap (build/<mpi>-tsan) and
#                   the threaded tests (thread_stress, rndv_threads,
#                   rndv_threads_shm, rndv_probe_order_mt) under it on
#                   every MPI; fails on any
#                   report outside the MPI's own libraries (scripts/tsan;
#                   about 5 minutes)
#   make install PREFIX=/usr/local

PREFIX ?= /usr/local
comma := ,
PYTHON ?= python3

# Before anything else: without the packages there is nothing to detect.
ifeq ($(filter setup clean,$(MAKECMDGOALS)),)
  ifneq ($(shell scripts/setup --check >/dev/null 2>&1 && echo ok),ok)
    $(info scripts/setup: installing missing packages)
    ifneq ($(shell scripts/setup >&2 && echo ok),ok)
      $(error scripts/setup failed)
    endif
  endif
endif

MPIS := $(strip $(foreach m,openmpi mpich,\
          $(if $(shell command -v mpicc.$(m) 2>/dev/null),$(m))))

CFLAGS_COMMON := -O2 -g -std=gnu11 -fPIC -fvisibility=hidden \
                 -Wall -Wextra -Werror -Wno-unused-parameter \
                 -Iinclude -Isrc -Iwrap
# The library's folders, lowest layer first: each calls only folders
# before it (scripts/layering checks the built objects; make check runs it).
LIB_DIRS := util detect xport core buf op rndv p2p recover coll ulfm winfile life
LIB_SRCS := $(sort $(foreach d,$(LIB_DIRS),$(wildcard src/$(d)/*.c)))
GEN_SRCS := gen/ftwgen.py gen/rules.py
TEST_SRCS := $(sort $(wildcard tests/*.c))
TOOLS := build/bin/ftw-supervise build/bin/ftw-info

.PHONY: all lib tests tools check check-rndv-1k check-verbs check-cluster demo bench stress tsan verbs-lab-smoke install clean setup
all: lib tools tests

# ---- per-MPI rules ------------------------------------------------------
define mpi_rules
B_$(1) := build/$(1)
CC_$(1) := mpicc.$(1)
OBJS_$(1) := $$(patsubst src/%.c,build/$(1)/obj/%.o,$$(LIB_SRCS))

build/$(1)/wrap/.stamp: $$(GEN_SRCS)
	@mkdir -p build/$(1)/wrap
	$$(PYTHON) gen/ftwgen.py --cc mpicc.$(1) --out build/$(1)/wrap
	@touch $$@

build/$(1)/obj/%.o: src/%.c build/$(1)/wrap/.stamp $$(wildcard src/*/*.h) include/ftwrap.h include/mpi-ext.h
	@mkdir -p $$(dir $$@)
	mpicc.$(1) $$(CFLAGS_COMMON) -Ibuild/$(1)/wrap -c $$< -o $$@

build/$(1)/libftwrap.so: $$(OBJS_$(1)) build/$(1)/wrap/.stamp src/ftwrap.map wrap/wrap.h
	@mkdir -p build/$(1)/wrapobj
	for f in build/$(1)/wrap/wrap_*.c; do \
	  mpicc.$(1) $$(CFLAGS_COMMON) -Ibuild/$(1)/wrap -c $$$$f \
	    -o build/$(1)/wrapobj/$$$$(basename $$$${f%.c}).o || exit 1; \
	done
	mpicc.$(1) -shared -Wl,-soname,libftwrap.so -Wl,--version-script=src/ftwrap.map -Wl,-z,defs \
	  -o $$@ $$(OBJS_$(1)) build/$(1)/wrapobj/*.o -lunwind -libverbs -lpthread

build/$(1)/tests/%: tests/%.c $$(wildcard tests/*.h) include/ftwrap.h include/mpi-ext.h build/$(1)/libftwrap.so
	@mkdir -p build/$(1)/tests
	mpicc.$(1) -O1 -g -std=gnu11 -Wall -Wextra -Werror -Iinclude -Itests $$< -o $$@ \
	  $$(if $$(shell grep -l 'ftw-test:.*link=ftwrap' $$<),\
	     -Lbuild/$(1) -lftwrap -Wl$$(comma)-rpath$$(comma)$$(abspath build/$(1)))

# A test that includes another test's source (the same test, another victim
# or transport).
build/$(1)/tests/validate_during0: tests/validate_during.c
build/$(1)/tests/thread_stress_fast: tests/thread_stress.c
build/$(1)/tests/comm_dup_inside_mt: tests/comm_dup_inside.c
build/$(1)/tests/comm_dup_race_mt build/$(1)/tests/comm_split_race_mt: tests/comm_dup_race.c
build/$(1)/tests/win_dup_fail_mt: tests/win_dup_fail.c
build/$(1)/tests/rndv_split_stall: tests/rndv_shm_stall.c
build/$(1)/tests/agree_tree_root build/$(1)/tests/agree_tree_two: tests/agree_tree.c
build/$(1)/tests/rndv_p2p_shm build/$(1)/tests/rndv_p2p_auto: tests/rndv_p2p.c
build/$(1)/tests/rndv_probe_shm: tests/rndv_probe.c
build/$(1)/tests/rndv_threads_shm build/$(1)/tests/rndv_threads_auto: tests/rndv_threads.c
build/$(1)/tests/rndv_type_lifetime: tests/p2p_type_lifetime.c
build/$(1)/tests/rndv_fail_sender_shm: tests/rndv_fail_sender.c
build/$(1)/tests/rndv_fail_receiver_shm: tests/rndv_fail_receiver.c
build/$(1)/tests/rndv_first_frag_kill_pull: tests/rndv_first_frag_kill.c
build/$(1)/tests/inter_validate_even: tests/inter_validate.c
build/$(1)/tests/inter_shrink_even: tests/inter_shrink.c
build/$(1)/tests/agree_nomem_agree build/$(1)/tests/agree_nomem_shrink: tests/agree_nomem.c
build/$(1)/tests/wait_mixed_file_first: tests/wait_mixed.c
build/$(1)/tests/settle_kill_drain build/$(1)/tests/settle_kill_shrink: tests/settle_kill.c
build/$(1)/tests/detect_adjacent build/$(1)/tests/detect_relay: tests/detect_notice.c

lib: build/$(1)/libftwrap.so
tests: $$(patsubst tests/%.c,build/$(1)/tests/%,$$(TEST_SRCS))
endef
$(foreach m,$(MPIS),$(eval $(call mpi_rules,$(m))))
# A test that includes another's source.
$(foreach m,$(MPIS),build/$(m)/tests/comm_split_race): tests/comm_dup_race.c

# ---- ThreadSanitizer build (make tsan) ------------------------------------
# The library and tests/thread_stress with -fsanitize=thread, apart from
# the normal build (build/<mpi>-tsan); the wrappers come from the normal
# build's generated sources.
CFLAGS_TSAN := $(filter-out -O2,$(CFLAGS_COMMON)) -O1 -fsanitize=thread -DFTW_TSAN
TSAN_TESTS := thread_stress rndv_threads rndv_threads_shm rndv_probe_order_mt bsend_mt
define tsan_rules
OBJS_$(1)_tsan := $$(patsubst src/%.c,build/$(1)-tsan/obj/%.o,$$(LIB_SRCS))

build/$(1)-tsan/obj/%.o: src/%.c build/$(1)/wrap/.stamp $$(wildcard src/*/*.h) include/ftwrap.h include/mpi-ext.h
	@mkdir -p $$(dir $$@)
	mpicc.$(1) $$(CFLAGS_TSAN) -Ibuild/$(1)/wrap -c $$< -o $$@

build/$(1)-tsan/libftwrap.so: $$(OBJS_$(1)_tsan) build/$(1)/wrap/.stamp src/ftwrap.map wrap/wrap.h
	@mkdir -p build/$(1)-tsan/wrapobj
	for f in build/$(1)/wrap/wrap_*.c; do \
	  mpicc.$(1) $$(CFLAGS_TSAN) -Ibuild/$(1)/wrap -c $$$$f \
	    -o build/$(1)-tsan/wrapobj/$$$$(basename $$$${f%.c}).o || exit 1; \
	done
	mpicc.$(1) -fsanitize=thread -shared -Wl,-soname,libftwrap.so -Wl,--version-script=src/ftwrap.map -Wl,-z,defs \
	  -o $$@ $$(OBJS_$(1)_tsan) build/$(1)-tsan/wrapobj/*.o -lunwind -libverbs -lpthread

build/$(1)-tsan/tests/%: tests/%.c $$(wildcard tests/*.h) include/ftwrap.h include/mpi-ext.h build/$(1)-tsan/libftwrap.so
	@mkdir -p build/$(1)-tsan/tests
	mpicc.$(1) -O1 -g -std=gnu11 -fsanitize=thread -Wall -Wextra -Werror -Iinclude -Itests $$< -o $$@ \
	  -Lbuild/$(1)-tsan -lftwrap -Wl$$(comma)-rpath$$(comma)$$(abspath build/$(1)-tsan)

tsan-build: build/$(1)-tsan/libftwrap.so $$(patsubst %,build/$(1)-tsan/tests/%,$$(TSAN_TESTS))
endef
$(foreach m,$(MPIS),$(eval $(call tsan_rules,$(m))))

.PHONY: tsan-build
tsan: tools tsan-build
	MPIS="$(MPIS)" scripts/tsan $(TSAN_TESTS)

# ---- tools (no MPI) ------------------------------------------------------
tools: $(TOOLS)
build/bin/ftw-supervise: src/tools/ftw-supervise.c src/util/record.h
	@mkdir -p build/bin
	gcc -O2 -g -std=gnu11 -Wall -Wextra -Werror -Isrc $< -o $@
build/bin/ftw-info: src/tools/ftw-info.c src/util/config.c src/util/log.c src/util/status.c $(wildcard src/util/*.h)
	@mkdir -p build/bin
	gcc -O2 -g -std=gnu11 -Wall -Wextra -Werror -Isrc $(filter %.c,$^) -o $@ -lunwind

# ---- running -------------------------------------------------------------
check: all
	@test -n "$(MPIS)" || { echo "no MPI installed" >&2; exit 1; }
	@st=0; for m in $(MPIS); do \
	  for mode in native ftwrap; do \
	    echo "=== $$m, $$mode ==="; \
	    prove -e "tests/run $$m $$mode" $$(ls build/$$m/tests/* ) || st=1; \
	  done; \
	done; \
	echo "=== generator coverage ==="; \
	MPIS="$(MPIS)" prove tests/gen_coverage.sh || st=1; \
	echo "=== the library's folders are layers ==="; \
	MPIS="$(MPIS)" LIB_DIRS="$(LIB_DIRS)" prove tests/layering.sh || st=1; \
	echo "=== ftwrun's command line and remote records ==="; \
	MPIS="$(MPIS)" prove tests/ftwrun_cli.sh || st=1; \
	echo "=== the installed ftwrap, a ULFM program built with pkg-config ==="; \
	MPIS="$(MPIS)" prove tests/install.sh || st=1; \
	echo "=== jobs across hosts that lose one (cluster lab) ==="; \
	{ scripts/setup --cluster && MPIS="$(MPIS)" prove -v tests/cluster.sh; } || st=1; \
	echo "=== verbs transport in the soft-RoCE lab ==="; \
	{ scripts/setup --lab && scripts/check-verbs; } || st=1; \
	exit $$st

# TEST_ENV wins over the tests' own env= lines (tests/run).
check-rndv-1k: all
	@st=0; for m in $(MPIS); do \
	  echo "=== $$m, ftwrap, FTW_RNDV_THRESHOLD=1k ==="; \
	  TEST_ENV=FTW_RNDV_THRESHOLD=1k prove -e "tests/run $$m ftwrap" \
	    $$(ls build/$$m/tests/p2p_* build/$$m/tests/rndv_*) || st=1; \
	done; exit $$st

demo: all
	@for m in $(MPIS); do scripts/demo/run $$m || exit 1; done

bench: all
	scripts/bench/run
	scripts/bench/drain
	scripts/bench/rndv
	scripts/bench/create
	scripts/bench/coll
	scripts/bench/win

stress: all
	scripts/stress

setup:
	scripts/setup

# Jobs across hosts that lose one (tests/cluster.sh, in scripts/cluster-lab;
# root, about 5 minutes).
check-cluster: all
	scripts/setup --cluster
	MPIS="$(MPIS)" prove -v tests/cluster.sh

verbs-lab-smoke:
	scripts/verbs-lab-smoke

check-verbs: all
	scripts/check-verbs

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/ftwrap \
	  $(DESTDIR)$(PREFIX)/libexec/ftwrap $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 scripts/ftwrun $(DESTDIR)$(PREFIX)/bin/ftwrun
	install -m 644 include/ftwrap.h $(DESTDIR)$(PREFIX)/include/ftwrap.h
	# ULFM's mpi-ext.h in a directory of its own, which -I puts before the
	# MPI's (a system include directory would come after it).
	install -m 644 include/mpi-ext.h include/ftwrap.h \
	  $(DESTDIR)$(PREFIX)/include/ftwrap/
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/libexec/ftwrap/
	for m in $(MPIS); do \
	  install -d $(DESTDIR)$(PREFIX)/lib/ftwrap/$$m && \
	  install -m 755 build/$$m/libftwrap.so $(DESTDIR)$(PREFIX)/lib/ftwrap/$$m/ && \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e "s|@MPI@|$$m|g" scripts/ftwrap.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ftwrap-$$m.pc || exit 1; \
	done
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e "s|@MPI@|$(firstword $(MPIS))|g" \
	  scripts/ftwrap.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ftwrap.pc

clean:
	rm -rf build
