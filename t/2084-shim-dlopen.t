#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dlopen of shared objects in the mount (issue 18.2): the loader's own opens
# bypass any preload, so the shim makes a staged object a real file first
# (a private mirror of the tree in the job directory, so $ORIGIN works).
# A C extension of a staged Python package (PyYAML's _yaml), ctypes.CDLL of
# a staged library whose dependency is found through $ORIGIN RPATH, a
# missing staged path (the loader's usual error), and a library found by a
# bare name through the caller's RUNPATH (the wrapper must not hide the
# caller from the loader).  Compared with the native runs.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

YAMLDIR=/usr/lib/python3/dist-packages/yaml
test_require CC
test_lazy_prereq YAML_C 'ls "$YAMLDIR"/_yaml*.so' "python3-yaml with _yaml is not installed in $YAMLDIR"

test_expect_success 'setup: PyYAML (with _yaml) and two libraries linked by $ORIGIN, staged' '
	mkdir -p src/site src/lib src/deps &&
	if [ -d "$YAMLDIR" ]; then cp -a "$YAMLDIR" src/site/; fi &&
	printf "int dep_value(void) { return 40; }\n" >dep.c &&
	printf "int dep_value(void);\nint top_value(void) { return dep_value() + 2; }\n" >top.c &&
	cc -shared -fPIC -o src/deps/libdep.so -Wl,-soname,libdep.so dep.c &&
	cc -shared -fPIC -o src/lib/libtop.so top.c -Lsrc/deps -ldep -Wl,-rpath,"\$ORIGIN/../deps" &&
	ln -s libtop.so src/lib/libtop-link.so &&
	touch_root src &&
	stage_tree src -N 1 -p 2
'

# same CMD: CMD with ROOT the source tree, then through the shim with ROOT
# the mount; outputs with the root replaced must agree
same() {
	(ROOT="$TRASH/src"; eval "$1") >native.raw 2>&1
	echo "exit $?" >>native.raw
	(ROOT="$MOUNT"; export LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" \
		DSTAGE_NODE=0; eval "$1") >staged.raw 2>&1
	echo "exit $?" >>staged.raw
	sed "s,$TRASH/src,ROOT,g" native.raw >native.out &&
	sed "s,$MOUNT,ROOT,g" staged.raw >staged.out &&
	test_cmp native.out staged.out
}

test_expect_success YAML_C 'import yaml from the mount uses its C extension' '
	same "\"$PY\" -c \"import sys; sys.path.insert(0, sys.argv[1] + \\\"/site\\\"); import yaml; print(yaml.__with_libyaml__, yaml.__file__); print(yaml.load(\\\"a: [1, 2]\\\", Loader=yaml.CLoader))\" \"\$ROOT\"" &&
	test_grep "^True ROOT/site/yaml/__init__.py" staged.out
'
test_expect_success 'ctypes.CDLL of a staged library, its dependency through $ORIGIN; by a symlink; relative' '
	same "\"$PY\" -c \"import ctypes, sys; print(ctypes.CDLL(sys.argv[1] + \\\"/lib/libtop.so\\\").top_value(), ctypes.CDLL(sys.argv[1] + \\\"/lib/libtop-link.so\\\").top_value())\" \"\$ROOT\"" &&
	test_grep "^42 42" staged.out &&
	printf "cd \"\$1/lib\" && exec \"\$2\" -c \"import ctypes; print(ctypes.CDLL(\\\\\"./libtop.so\\\\\").top_value())\"\n" >incwd.sh &&
	same "sh incwd.sh \"\$ROOT\" \"$PY\"" &&
	test_grep "^42" staged.out
'
test_expect_success 'a missing staged object: the loader s usual error' '
	same "\"$PY\" -c \"import ctypes, sys; ctypes.CDLL(sys.argv[1] + \\\"/lib/nope.so\\\")\" \"\$ROOT\" 2>&1 | tail -1" &&
	test_grep "cannot open shared object file: No such file or directory" staged.out
'
test_expect_success 'a bare name through the calling program s RUNPATH still loads' '
	mkdir -p plug &&
	cc -shared -fPIC -o plug/libplug.so dep.c &&
	printf "#include <dlfcn.h>\n#include <stdio.h>\nint main(void) { void *h = dlopen(\"libplug.so\", RTLD_NOW); printf(\"%%s\\\\n\", h ? \"loaded\" : dlerror()); return !h; }\n" >runp.c &&
	cc -o runp runp.c -ldl -Wl,--enable-new-dtags,-rpath,"$TRASH/plug" &&
	./runp >native && shim ./runp >staged && test_cmp native staged
'
test_expect_success 'the cache: the staged bytes, private, reused by the next process' '
	cmp src/lib/libtop.so "$JOBDIR/dl/lib/libtop.so" &&
	cmp src/deps/libdep.so "$JOBDIR/dl/deps/libdep.so" &&
	test "$(stat -c %a "$JOBDIR/dl")" = 700 &&
	before=$(stat -c %i "$JOBDIR/dl/lib/libtop.so") &&
	shim "$PY" -c "import ctypes; ctypes.CDLL(\"$MOUNT/lib/libtop.so\")" &&
	test "$(stat -c %i "$JOBDIR/dl/lib/libtop.so")" = "$before"
'
test_expect_success 'staged bytes damaged in the store: the load fails and names the reason' '
	rm -rf "$JOBDIR/dl" &&
	"$PY" -c "
import sys
lib = open(sys.argv[1], \"rb\").read()
st = open(sys.argv[2], \"r+b\")
data = st.read()
at = data.find(lib)
assert at >= 0
st.seek(at + len(lib) // 2)
st.write(bytes([data[at + len(lib) // 2] ^ 0xff]))
" src/lib/libtop.so "$JOBDIR/0/store" &&
	! shim "$PY" -c "import ctypes; ctypes.CDLL(\"$MOUNT/lib/libtop.so\")" 2>err &&
	test_grep "dstage: Input/output error" err &&
	! test -e "$JOBDIR/dl/lib/libtop.so"
'

test_done
