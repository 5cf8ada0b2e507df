# SPDX-License-Identifier: BSD-3-Clause
# dstage: a plain Makefile.  `make`, `make test`, `make demo`, `make bench`,
# `make install PREFIX=... DESTDIR=...` (and `make uninstall`),
# `make SANITIZE=address,undefined`.
# `make style`: clang-format (.clang-format, the code as written) on the
# lines changed since STYLE_BASE (default: where this branch left main, else
# HEAD: the uncommitted changes), in place; the rest of the tree is left as
# it is (new files: `git add -N` them first).  `make style-check`: the same
# as a diff, exit 1 when a changed line is not formatted.
#
# Layout of the build tree (mirrors an installed prefix, so `dstage env` can
# find the preload library next to itself):
#   build/bin/dstage                 the command (MPI, HDF5, zlib)
#
# Folders, each including only folders below it (tools/modgraph.sh prints
# the graph; t/0001-modules.t fails on a cycle):
#   common/ (libc only)  <  io/ (the shim), s3/, mpi/ (the MPI layer)
#   <  hdf5/ (s3, mpi), outputs/ (mpi: the write-once outputs)  <  shuffle/
#   (mpi, outputs)  <  stage/ (hdf5, s3, mpi, outputs' dsoutputs.h)  <  cli/
#   (main and its command table, run)
# mpi/ goes into the dstage executable and the MPI test helpers only.
#   build/lib/libdstage-preload.so   the shim (libc only: libz is opened at the first zlib file)
#   build/t/*                        test helpers (t/helpers/*.c)
#   build/gen/dsversion.h            the version (tools/version.sh)

PREFIX   ?= /usr/local
DESTDIR  ?=

# MPI=mpich (default) or MPI=openmpi: which MPI (and HDF5 built on it) the
# command and the MPI helpers link, each into its own build tree, so both
# can stand side by side (docs/mpi.md): build/ for MPICH, build-openmpi/ for
# Open MPI.  `make test MPI=openmpi` runs the MPI test families on it.
MPI      ?= mpich
ifeq ($(MPI),mpich)
O        := build
MPICC    ?= mpicc.mpich
HDF5_PC  ?= hdf5-mpich
else ifeq ($(MPI),openmpi)
O        := build-openmpi
MPICC    ?= mpicc.openmpi
HDF5_PC  ?= hdf5-openmpi
else
$(error MPI=$(MPI): mpich or openmpi)
endif

CC       ?= gcc
ifeq ($(origin CC),default)
CC       := gcc
endif
HDF5_CFLAGS := $(shell pkg-config --cflags $(HDF5_PC) 2>/dev/null)
HDF5_LIBS   := $(shell pkg-config --libs $(HDF5_PC) 2>/dev/null)
ZLIB_CFLAGS := $(shell pkg-config --cflags zlib 2>/dev/null)
ZLIB_LIBS   := $(shell pkg-config --libs zlib 2>/dev/null || echo -lz)
# s3/: object storage through libcurl (SigV4, multi) and expat (listings)
CURL_CFLAGS := $(shell pkg-config --cflags libcurl 2>/dev/null)
CURL_LIBS   := $(shell pkg-config --libs libcurl 2>/dev/null || echo -lcurl)
EXPAT_LIBS  := $(shell pkg-config --libs expat 2>/dev/null || echo -lexpat)

WARN     := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes \
            -Wvla -Wshadow -Wpointer-arith -Wformat=2 -Wno-format-nonliteral \
            -fno-common
OPT      ?= -O2 -g
CFLAGS_ALL := -std=gnu11 $(OPT) $(WARN) -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
              -Icommon -fPIC $(EXTRA_CFLAGS)
ifneq ($(SANITIZE),)
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
endif

# Rebuild everything when the flags change (Redis' .make-settings).
SETTINGS := $(O)/.make-settings
SETTINGS_TEXT := $(CC) $(MPICC) $(CFLAGS_ALL) $(SAN_FLAGS) $(HDF5_CFLAGS)
$(shell mkdir -p $(O) && if [ "$$(cat $(SETTINGS) 2>/dev/null)" != "$(SETTINGS_TEXT)" ]; then echo "$(SETTINGS_TEXT)" > $(SETTINGS); fi)

# The version (tools/version.sh: git describe, else the VERSION file), into
# $(O)/gen/dsversion.h for `dstage --version`, rewritten only when it changes
# (only cli/version.o depends on it).
# (The script by the Makefile's own path: `make -f DIR/Makefile` from
# elsewhere, as t/0012 does, still finds it.)
DS_TOP     := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
DS_VERSION := $(shell sh $(DS_TOP)tools/version.sh)
ifeq ($(DS_VERSION),)
$(error tools/version.sh gave no version (is the VERSION file there?))
endif
VERSION_H  := $(O)/gen/dsversion.h
$(shell mkdir -p $(O)/gen && v='#define DSTAGE_VERSION "$(DS_VERSION)"' && if [ "$$(cat $(VERSION_H) 2>/dev/null)" != "$$v" ]; then echo "$$v" > $(VERSION_H); fi)
$(O)/cli/version.o: CFLAGS_ALL += -I$(O)/gen

COMMON_SRC  := $(wildcard common/*.c)
HDF5_SRC    := $(wildcard hdf5/*.c)
MPI_SRC     := $(wildcard mpi/*.c)
CLI_SRC     := $(wildcard cli/*.c)
STAGE_SRC   := $(wildcard stage/*.c)
SHUFFLE_SRC := $(wildcard shuffle/*.c)
OUTPUTS_SRC := $(wildcard outputs/*.c)
IO_SRC      := $(wildcard io/*.c)
S3_SRC      := $(wildcard s3/*.c)
THELP_SRC   := $(wildcard t/helpers/*.c)

COMMON_OBJ  := $(COMMON_SRC:%.c=$(O)/%.o)
COMMON_PIC  := $(COMMON_SRC:%.c=$(O)/pic/%.o)
HDF5_OBJ    := $(HDF5_SRC:%.c=$(O)/%.o)
MPI_OBJ     := $(MPI_SRC:%.c=$(O)/%.o)
CLI_OBJ     := $(CLI_SRC:%.c=$(O)/%.o)
STAGE_OBJ   := $(STAGE_SRC:%.c=$(O)/%.o)
SHUFFLE_OBJ := $(SHUFFLE_SRC:%.c=$(O)/%.o)
OUTPUTS_OBJ := $(OUTPUTS_SRC:%.c=$(O)/%.o)
IO_OBJ      := $(IO_SRC:%.c=$(O)/pic/%.o)
S3_OBJ      := $(S3_SRC:%.c=$(O)/%.o)

DSTAGE   := $(O)/bin/dstage
PRELOAD  := $(O)/lib/libdstage-preload.so
LIBCOMMON := $(O)/libdscommon.a
# Test helpers: t/helpers/NAME.c -> build/t/NAME.  Names starting with mpi-
# link MPI and the MPI layer, h5- link HDF5 and the pack module (and the MPI
# layer, which pack uses), the rest libc + common + zlib.
THELP    := $(THELP_SRC:t/helpers/%.c=$(O)/t/%)

all: $(DSTAGE) $(PRELOAD) $(THELP)

# Objects of the MPI side: compiled by mpicc with HDF5's flags.
MPI_SIDE := $(O)/hdf5/%.o $(O)/mpi/%.o $(O)/stage/%.o $(O)/shuffle/%.o $(O)/outputs/%.o $(O)/cli/%.o
$(MPI_SIDE): CCX = $(MPICC)
$(MPI_SIDE): XFLAGS = $(HDF5_CFLAGS) $(ZLIB_CFLAGS) -Ihdf5 -Impi -Istage -Ishuffle -Ioutputs -Icli -Is3 $(SAN_FLAGS)
$(O)/common/%.o: CCX = $(CC)
$(O)/common/%.o: XFLAGS = $(SAN_FLAGS)
$(O)/s3/%.o: CCX = $(CC)
$(O)/s3/%.o: XFLAGS = $(CURL_CFLAGS) -Is3 $(SAN_FLAGS)

$(O)/%.o: %.c $(SETTINGS)
	@mkdir -p $(@D)
	$(CCX) $(CFLAGS_ALL) $(XFLAGS) -MMD -MP -c $< -o $@

# The shim and the common objects it links: no sanitizer (an LD_PRELOAD'ed
# library cannot carry ASan's runtime into arbitrary programs), no MPI.
$(O)/pic/%.o: %.c $(SETTINGS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) -fvisibility=hidden -Iio -MMD -MP -c $< -o $@

$(LIBCOMMON): $(COMMON_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(DSTAGE): $(CLI_OBJ) $(STAGE_OBJ) $(SHUFFLE_OBJ) $(OUTPUTS_OBJ) $(MPI_OBJ) $(HDF5_OBJ) $(S3_OBJ) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(MPICC) $(SAN_FLAGS) -o $@ $(CLI_OBJ) $(STAGE_OBJ) $(SHUFFLE_OBJ) $(OUTPUTS_OBJ) $(MPI_OBJ) $(HDF5_OBJ) $(S3_OBJ) $(LIBCOMMON) $(HDF5_LIBS) $(ZLIB_LIBS) $(CURL_LIBS) $(EXPAT_LIBS) -lpthread -lm

# init.o and common.o first: their code is what every process runs (start,
# fork, exit), and their data (DS__HOT in io/shim.h) lands on the page after
# the GOT, the one page of the shim a process that names no staged path
# writes (bench/startab.sh, docs/performance.md "Process start").
PRELOAD_OBJ := $(O)/pic/io/init.o $(O)/pic/common/common.o \
               $(filter-out $(O)/pic/io/init.o $(O)/pic/common/common.o,$(IO_OBJ) $(COMMON_PIC))
# io/preload.ld: the .bss in the file (one mapping less per process).
# PRELOAD_LDFLAGS: more link flags (measure them with bench/startab.sh).
PRELOAD_LDFLAGS ?=
$(PRELOAD): $(PRELOAD_OBJ) io/preload.ld
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-z,defs -Wl,-soname,libdstage-preload.so -Wl,-T,io/preload.ld $(PRELOAD_LDFLAGS) \
		-o $@ $(PRELOAD_OBJ) -ldl -lpthread

# MPI helpers carry the MPI layer like dstage, objects not an archive: they
# run over TCP on the multi-host bed, where MPI_Finalize hangs without
# mpi/ucx_close.c, which nothing calls by name
$(O)/t/mpi-%: t/helpers/mpi-%.c $(MPI_OBJ) $(LIBCOMMON) $(SETTINGS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) $(SAN_FLAGS) -Impi -It -MMD -MP -o $@ $< $(MPI_OBJ) $(LIBCOMMON) $(ZLIB_LIBS) -lpthread -lm

$(O)/t/h5-%: t/helpers/h5-%.c $(HDF5_OBJ) $(MPI_OBJ) $(S3_OBJ) $(LIBCOMMON) $(SETTINGS)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS_ALL) $(SAN_FLAGS) $(HDF5_CFLAGS) -Ihdf5 -Impi -Is3 -It -MMD -MP -o $@ $< $(HDF5_OBJ) $(MPI_OBJ) $(S3_OBJ) $(LIBCOMMON) $(HDF5_LIBS) $(ZLIB_LIBS) $(CURL_LIBS) $(EXPAT_LIBS) -lpthread -lm

$(O)/t/s3-%: t/helpers/s3-%.c $(S3_OBJ) $(LIBCOMMON) $(SETTINGS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(SAN_FLAGS) $(CURL_CFLAGS) -Is3 -It -MMD -MP -o $@ $< $(S3_OBJ) $(LIBCOMMON) $(CURL_LIBS) $(EXPAT_LIBS) $(ZLIB_LIBS) -lpthread -lm

$(O)/t/%: t/helpers/%.c $(LIBCOMMON) $(SETTINGS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_ALL) $(SAN_FLAGS) -It -MMD -MP -o $@ $< $(LIBCOMMON) $(ZLIB_LIBS) -lpthread -lm

-include $(wildcard $(O)/*/*.d $(O)/pic/*/*.d $(O)/t/*.d)

# The S3 server of the s3:// tests and benchmarks (t/lib-s3.sh), from the npm
# registry at a pinned version, into build/npm (never the system's).
S3RVER_VERSION := 3.7.1
S3RVER := $(O)/npm/node_modules/.bin/s3rver
npm-s3: $(S3RVER)
# npm is not in DEB_TEST: these machines carry NodeSource's nodejs, which
# bundles npm and conflicts with Debian's npm package; where no npm exists at
# all, Debian's is installed (as root)
$(S3RVER):
	@mkdir -p $(O)/npm
	@command -v npm >/dev/null || sh tools/deps.sh npm || :
	@if command -v npm >/dev/null; then \
		npm install --prefix $(O)/npm --no-audit --no-fund --loglevel=error s3rver@$(S3RVER_VERSION) >$(O)/npm/install.log 2>&1 || \
		{ echo "npm install s3rver@$(S3RVER_VERSION) failed (see $(O)/npm/install.log): the s3:// tests will skip"; }; \
	else echo "npm not found: the s3:// tests will skip"; fi

# ---------------------------------------------------------------------------
# Packages from Debian.  As root: install what is missing; otherwise print the
# exact command.  `make demo` and `make test` pull this in, so both work as the
# first command typed on a fresh Debian 12 machine.
DEB_BUILD := mpich libmpich-dev libhdf5-mpich-dev hdf5-tools zlib1g-dev pkg-config \
             libcurl4-openssl-dev libexpat1-dev
# MPI=openmpi (and srun --mpi=pmix: libpmix2 comes with libopenmpi3)
DEB_OPENMPI := openmpi-bin libopenmpi-dev libhdf5-openmpi-dev
DEB_TEST  := python3-h5py python3-pil python3-numpy python3-torch python3-torchvision \
             clang clang-format libclang-rt-14-dev procps psmisc strace \
             nodejs python3-yaml rsync perl mawk cmake fio \
             man-db groff-base bsdextrautils lmod
DEB_BENCH := squashfuse squashfs-tools fuse3 gnuplot-nox awscli s3fs
DEB_SLURM := slurm-wlm munge
DEB_HOSTS := iproute2 util-linux
DEB_ALL   := $(DEB_BUILD) $(DEB_OPENMPI) $(DEB_TEST) $(DEB_SLURM) $(DEB_HOSTS)

deps:
	@sh tools/deps.sh $(DEB_ALL)
deps-build:
	@sh tools/deps.sh $(DEB_BUILD) $(if $(filter openmpi,$(MPI)),$(DEB_OPENMPI))
deps-bench:
	@sh tools/deps.sh $(DEB_ALL) $(DEB_BENCH)

# --comments: a failing test's diagnostics (t/test-lib.sh prints them as
# "#   ..." lines after "not ok") reach the log of a non-verbose run, so a
# failure in CI says why; --failures: the "not ok" lines themselves;
# --timer: each script's wall time.  -j: scripts run in parallel where
# t/testrules.yml allows (independent, no wall-clock bounds), the others
# alone at the end; TEST_JOBS chosen by measurement (t/README.md).
TEST_JOBS ?= 3
PROVE_FLAGS ?= --comments --failures --timer -j$(TEST_JOBS)

# MPI=openmpi: the MPI test families on the Open MPI build (DSTAGE_MPILIB
# tells t/test-lib.sh which build and mpiexec; docs/mpi.md says why these
# and which are left out): the suite's own check of both builds, pack -n,
# stage, serve and the epoch shuffle, failover, outputs (one node's loss and
# replicas), and Slurm: a stage step and train.sbatch with outputs (srun
# --mpi=pmix; the lost-node job, t/3210, in the MPICH run only).  What they run besides
# MPI (the shim, the pack format, S3) is the same code as the MPICH build's
# and is tested there.
OPENMPI_TESTS := t/0006-*.t t/1002-*.t t/1010-*.t t/2070-*.t \
                 t/2200-*.t t/2204-*.t t/2205-*.t t/2206-*.t t/2207-*.t t/2220-*.t \
                 t/3002-*.t t/3003-*.t t/3004-*.t t/3005-*.t t/3006-*.t t/3008-*.t t/3013-*.t \
                 t/3023-*.t t/3026-*.t t/3028-*.t \
                 t/3200-*.t t/3202-*.t t/3204-*.t t/3230-*.t \
                 t/4000-*.t t/4001-*.t t/4003-*.t t/4010-*.t t/8010-*.t t/9008-*.t
TESTS := $(if $(filter openmpi,$(MPI)),$(wildcard $(OPENMPI_TESTS)),t/)

test: deps
	@$(MAKE) --no-print-directory all
	$(if $(filter mpich,$(MPI)),@$(MAKE) --no-print-directory npm-s3)
	DSTAGE_MPILIB=$(MPI) prove $(PROVE_FLAGS) $(TESTS)

check: all
	DSTAGE_MPILIB=$(MPI) prove $(PROVE_FLAGS) $(TESTS)

demo: deps-build
	@$(MAKE) --no-print-directory all
	DSTAGE_MPILIB=$(MPI) sh tools/demo.sh

# Object storage end to end against a local S3 server (docs/s3.md).
demo-s3: deps-build
	@$(MAKE) --no-print-directory all npm-s3
	sh tools/demo-s3.sh

bench: deps-bench
	@$(MAKE) --no-print-directory all
	sh bench/run.sh $(if $(QUICK),--quick)

# `make install PREFIX=/opt/dstage DESTDIR=...` (docs/guide.md, "Installing at
# a site" in README.md).  The layout is fixed below PREFIX, because `dstage
# env` finds the shim at ../lib and the Python helper at
# ../share/dstage/python beside its own binary; MODULEDIR is where the Lmod
# module file goes (a site's central module tree, say), MODULE_DEPS the
# modules it loads first (the MPI and HDF5 dstage was built with, when they
# are modules: MODULE_DEPS="mpich/4.0 hdf5/1.10").  Every file installed is
# listed in PREFIX/share/dstage/install-manifest, which `make uninstall`
# removes: an uninstall after a newer build (another version, another
# module file name) still removes what was installed.
MODULEDIR   ?= $(PREFIX)/share/modulefiles
MODULE_DEPS ?=
INSTALL_FILES = \
	bin/dstage:0755:$(DSTAGE) \
	libexec/dstage/mksample:0755:$(O)/t/mksample \
	share/dstage/demo.sh:0755:tools/demo.sh \
	lib/libdstage-preload.so:0755:$(PRELOAD) \
	$(foreach f,$(wildcard io/python/dstage/*.py),share/dstage/python/dstage/$(notdir $(f)):0644:$(f)) \
	share/man/man1/dstage.1:0644:man/dstage.1 \
	$(foreach f,$(wildcard jobs/*.sbatch jobs/*.sh),share/dstage/jobs/$(notdir $(f)):0755:$(f)) \
	$(foreach f,$(wildcard jobs/*.py jobs/README.md),share/dstage/jobs/$(notdir $(f)):0644:$(f)) \
	share/doc/dstage/LICENSE:0644:LICENSE \
	share/doc/dstage/README.md:0644:README.md
INSTALL_MANIFEST = $(PREFIX)/share/dstage/install-manifest
MODULE_FILE = $(MODULEDIR)/dstage/$(DS_VERSION).lua

install: all
	@set -e; case "$(PREFIX)" in /*) ;; *) echo "make install: PREFIX '$(PREFIX)': must be an absolute path" >&2; exit 2;; esac; \
	m="$(DESTDIR)$(INSTALL_MANIFEST)"; install -d "$$(dirname "$$m")"; : >"$$m.tmp"; \
	for e in $(INSTALL_FILES); do \
		dst=$${e%%:*}; rest=$${e#*:}; mode=$${rest%%:*}; src=$${rest#*:}; \
		install -d "$(DESTDIR)$(PREFIX)/$$(dirname "$$dst")"; \
		echo "install $$src -> $(DESTDIR)$(PREFIX)/$$dst"; \
		install -m "$$mode" "$$src" "$(DESTDIR)$(PREFIX)/$$dst"; \
		echo "$(PREFIX)/$$dst" >>"$$m.tmp"; \
	done; \
	install -d "$(DESTDIR)$(MODULEDIR)/dstage"; \
	echo "module file -> $(DESTDIR)$(MODULE_FILE)"; \
	sh tools/modulefile.sh "$(PREFIX)" "$(DS_VERSION)" $(MODULE_DEPS) >"$(DESTDIR)$(MODULE_FILE).tmp"; \
	mv "$(DESTDIR)$(MODULE_FILE).tmp" "$(DESTDIR)$(MODULE_FILE)"; \
	echo "$(MODULE_FILE)" >>"$$m.tmp"; \
	echo "$(INSTALL_MANIFEST)" >>"$$m.tmp"; \
	sort -u "$$m.tmp" >"$$m"; rm -f "$$m.tmp"

# Removes what the manifest lists (or, without one, what this tree would
# install), then the folders of dstage's own that are left empty: never
# PREFIX/bin or another package's folder.
uninstall:
	@set -e; m="$(DESTDIR)$(INSTALL_MANIFEST)"; \
	if [ -f "$$m" ]; then files=$$(cat "$$m"); else \
		files="$(foreach e,$(INSTALL_FILES),$(PREFIX)/$(firstword $(subst :, ,$(e)))) $(MODULE_FILE)"; fi; \
	for f in $$files; do \
		case "$$f" in /*) ;; *) echo "make uninstall: '$$f' in $$m: not an absolute path" >&2; exit 1;; esac; \
		if [ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ]; then echo "rm $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f"; fi; \
		case "$$f" in */modulefiles/dstage/*.lua) rmdir "$$(dirname "$(DESTDIR)$$f")" 2>/dev/null || :;; esac; \
	done; \
	for d in share/dstage/python/dstage share/dstage/python share/dstage/jobs share/dstage share/doc/dstage \
		libexec/dstage; do \
		rmdir "$(DESTDIR)$(PREFIX)/$$d" 2>/dev/null || :; done

# The most branching functions of the command and the shim (pmccabe: modified
# cyclomatic complexity, traditional, statements, first line, lines), the
# TOP=20 highest first.  A report for the reviewer, not a test: no threshold.
.PHONY: complexity
complexity:
	@command -v pmccabe >/dev/null || { echo "make complexity: needs pmccabe (apt-get install pmccabe)" >&2; exit 1; }
	@pmccabe $(COMMON_SRC) $(HDF5_SRC) $(MPI_SRC) $(CLI_SRC) $(STAGE_SRC) $(SHUFFLE_SRC) \
		$(OUTPUTS_SRC) $(IO_SRC) $(S3_SRC) 2>/dev/null | sort -k1,1nr -k5,5nr | head -n $(or $(TOP),20)

STYLE_BASE ?= $(shell git merge-base HEAD main 2>/dev/null || echo HEAD)
CLANG_FORMAT_DIFF ?= clang-format-diff
STYLE_DIFF = git diff -U0 --no-color $(STYLE_BASE) -- '*.c' '*.h' | $(CLANG_FORMAT_DIFF) -p1
style:
	$(STYLE_DIFF) -i
.PHONY: style-check
style-check:
	@out=$$($(STYLE_DIFF)) || exit 2; \
	if [ -n "$$out" ]; then printf '%s\n' "$$out"; \
		echo "make style-check: the lines above are not formatted as .clang-format says (make style)"; exit 1; fi

# Hardening (t/9NNN).  `make fuzz`: the sanitizer variant of the command
# into build-asan/ (t/9000 and t/9001 then run their crafted packs through
# it too), then every libFuzzer target for FUZZ_SECS seconds from its corpus
# in t/fuzz/ (t/fuzz/run.sh).  `make soak`: the long tests, t/99NN-*.t,
# which `make test` skips.
FUZZ_SECS ?= 300
fuzz: all
	$(MAKE) --no-print-directory O=build-asan SANITIZE=address,undefined all
	sh t/fuzz/run.sh $(FUZZ_SECS)

soak: all
	DSTAGE_SOAK=1 prove -v t/99[0-9][0-9]-*.t

# `make check` STRESS_RUNS times, each from a fresh clone of HEAD, beside two
# busy loops (t/stress.sh, t/README.md)
STRESS_RUNS ?= 5
stress:
	sh t/stress.sh -n $(STRESS_RUNS)

clean:
	rm -rf $(O)

.PHONY: npm-s3 demo-s3 all deps deps-build deps-bench test check demo bench install uninstall style clean fuzz soak stress
