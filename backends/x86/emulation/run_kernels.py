"""Runs the cases of dump_kernels or dump_elementwise in BochsCPU, an x86 emulator with AVX-512 and
AVX512_BF16.

Each case (format: case_writer.h) calls one generated kernel, arguments in rdi: its memory is
written, the kernel runs, and the memory it lists is compared: bit for bit, or within an ulp
bound for approximations. The callee-saved registers must survive and the stack must balance; an
access to an unmapped page (every data region is followed by one) fails the case.

Setup (once; the package is on PyPI):
  python3 -m pip install --target /tmp/bochs bochscpu-python==0.4.0
  bazel run //backends/x86/emulation:dump_kernels -- /tmp/gemm_cases
  python3 backends/x86/emulation/run_kernels.py --site /tmp/bochs /tmp/gemm_cases [FILTER]
  bazel run //backends/x86/emulation:dump_elementwise -- /tmp/elementwise_cases
  python3 backends/x86/emulation/run_kernels.py --site /tmp/bochs /tmp/elementwise_cases [FILTER]

The wheel needs glibc 2.38 symbols (__isoc23_*): on older glibc a small shim is built and
preloaded. Its default CPU model lacks AVX512_BF16, so the runner works on a copy of the module
whose cpuid factories all return the Sapphire Rapids model.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

PAGE = 4096
SLOT = 0x10000  # one code slot per distinct kernel: Bochs caches decoded code by address
NSLOTS = 512
CODE, ARGS, STACK, STOP = 0x10000000, 0x50000000, 0x60000000, 0x70000000
# Guest data regions (case_writer.h), each followed by an unmapped page.
DATA = (0x20000000, 0x30000000, 0x40000000, 0x80000000, 0x90000000, 0xA0000000, 0xB0000000,
        0xC0000000)
DATA_PAGES = {**{base: 64 for base in DATA}, ARGS: 1, STACK: 2}
CALLEE_SAVED = {"rbx": 0x1111, "rbp": 0x2222, "r12": 0x3333, "r13": 0x4444, "r14": 0x5555,
                "r15": 0x6666}

SHIM = r"""
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
unsigned long long __isoc23_strtoull(const char* s, char** e, int b) { return strtoull(s, e, b); }
int __isoc23_sscanf(const char* s, const char* f, ...) {
  va_list ap; va_start(ap, f); int r = vsscanf(s, f, ap); va_end(ap); return r;
}
"""


def mismatches(got, want, dtype, max_ulp, open_nan):
    """(index, got, want) of the elements that differ beyond what the check allows."""
    size, sign = {"f32": (4, 31), "bf16": (2, 15), "s32": (4, None), "u8": (1, None)}[dtype]
    if got == want:
        return []

    def nan(bits):
        return (bits & ((1 << sign) - 1)) > (0x7F800000 if sign == 31 else 0x7F80)

    def ordered(bits):
        magnitude = bits & ((1 << sign) - 1)
        return -magnitude if bits >> sign else magnitude

    bad = []
    for i in range(len(want) // size):
        g = int.from_bytes(got[i * size:(i + 1) * size], "little")
        w = int.from_bytes(want[i * size:(i + 1) * size], "little")
        if g == w:
            continue
        if sign is not None and nan(g) and nan(w):
            if max_ulp > 0 or (open_nan and open_nan[i]):
                continue
        elif sign is not None and not nan(g) and not nan(w):
            if abs(ordered(g) - ordered(w)) <= max_ulp:
                continue
        bad.append((i, hex(g), hex(w)))
    return bad


def prepare(site, work):
    """Copies the package into `work`, patches its cpuid model, returns (site, preload)."""
    shutil.copytree(os.path.join(site, "bochscpu"), os.path.join(work, "bochscpu"))
    so = [f for f in os.listdir(os.path.join(work, "bochscpu")) if f.endswith(".so")][0]
    so = os.path.join(work, "bochscpu", so)
    syms = {}
    for line in subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and re.match(r"_Z\d+create_\w+_cpuidP8BX_CPU_C$", p[2]):
            syms[p[2]] = int(p[0], 16)
    spr = next(v for k, v in syms.items() if "sapphire_rapids" in k)
    segs = []
    for line in subprocess.run(["readelf", "-lW", so], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        p = line.split()
        if p and p[0] == "LOAD":
            segs.append((int(p[2], 16), int(p[1], 16), int(p[4], 16)))
    data = bytearray(open(so, "rb").read())
    for va in syms.values():
        if va == spr:
            continue
        off = next(va - v + o for v, o, n in segs if v <= va < v + n)
        data[off:off + 5] = b"\xe9" + struct.pack("<i", spr - (va + 5))  # jmp create_spr
    open(so, "wb").write(data)
    shim = os.path.join(work, "libisoc23_shim.so")
    src = os.path.join(work, "shim.c")
    open(src, "w").write(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", shim, src], check=True)
    return shim


def run_all(root, only):
    import bochscpu
    import bochscpu.cpu
    import bochscpu.memory

    sess = bochscpu.Session()

    def missing_page(gpa):
        raise RuntimeError(f"missing page {gpa:#x}")

    sess.missing_page_handler = missing_page
    pt = bochscpu.memory.PageMapLevel4Table()
    regions = dict(DATA_PAGES)
    regions[STOP] = 1
    for i in range(NSLOTS):
        regions[CODE + i * SLOT] = 4
    for base, pages in regions.items():
        for i in range(pages):
            gva = base + i * PAGE
            bochscpu.memory.page_insert(gva, bochscpu.memory.allocate_host_page())
            pt.insert(gva, gva, 1 if base in DATA_PAGES else 0)
    pml4 = 0x100000
    for hva, gpa in pt.commit(pml4):
        bochscpu.memory.page_insert(gpa, hva)

    def write(gva, data):
        assert bochscpu.memory.virt_write(pml4, gva, list(bytes(data))), hex(gva)

    write(STOP, b"\xf4")  # hlt: raises #GP at CPL3, which ends the run
    stop = {}

    def on_hlt(s, cpu_id):
        stop["why"] = "returned"
        s.stop()

    def on_exception(s, cpu_id, vector, error_code):
        rip = s.cpu.rip
        returned = vector == 13 and rip in (STOP, STOP + 1)
        stop["why"] = "returned" if returned else f"exception {vector} at {rip:#x}"
        s.stop()

    hook = bochscpu.Hook()
    hook.hlt = on_hlt
    hook.exception = on_exception
    slots = {}

    def run_case(d):
        code = open(f"{d}/code.bin", "rb").read()
        assert len(code) <= 4 * PAGE
        if code not in slots:
            assert len(slots) < NSLOTS
            slots[code] = CODE + len(slots) * SLOT
            write(slots[code], code)
        manifest = [line.split() for line in open(f"{d}/case.txt").read().splitlines()]
        for kind, address, name, *_ in manifest:
            if kind == "write":
                data = open(f"{d}/{name}", "rb").read()
                if data:
                    write(int(address, 0), data)
        st = bochscpu.State()
        bochscpu.cpu.set_long_mode(st)
        st.cr3 = pml4
        st.cr4 = st.cr4 | (1 << 18) | (1 << 9) | (1 << 10)  # OSXSAVE, OSFXSR, OSXMMEXCPT
        st.xcr0 = 0xE7  # x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
        st.mxcsr = 0x1F80
        rsp = STACK + PAGE
        write(rsp, struct.pack("<Q", STOP))
        st.rsp, st.rip, st.rdi = rsp, slots[code], ARGS
        for reg, v in CALLEE_SAVED.items():
            setattr(st, reg, v)
        cs = bochscpu.Segment()
        cs.present, cs.selector, cs.base, cs.limit, cs.attr = True, 0x33, 0, 0xFFFFFFFF, 0x22FB
        ds = bochscpu.Segment()
        ds.present, ds.selector, ds.base, ds.limit, ds.attr = True, 0x2B, 0, 0xFFFFFFFF, 0xCF3
        st.cs, st.ds, st.ss, st.es, st.fs, st.gs = cs, ds, ds, ds, ds, ds
        sess.cpu.state = st
        stop.clear()
        sess.run([hook])
        end = sess.cpu.state
        errors = []
        if stop.get("why") != "returned":
            errors.append(f"stopped: {stop.get('why')}")
        errors += [f"{r} clobbered" for r, v in CALLEE_SAVED.items() if getattr(end, r) != v]
        if end.rsp != rsp + 8:
            errors.append(f"rsp {end.rsp:#x}, want {rsp + 8:#x}")
        for kind, address, name, *check in manifest:
            if kind != "check":
                continue
            want = open(f"{d}/{name}", "rb").read()
            if not want:
                continue
            got = bytes(bochscpu.memory.virt_read(pml4, int(address, 0), len(want)))
            open_nan = open(f"{d}/{check[2]}", "rb").read() if len(check) > 2 else b""
            bad = mismatches(got, want, check[0], int(check[1]), open_nan)
            if bad:
                errors.append(f"{len(bad)} wrong elements at {address}, first {bad[:3]}")
        return errors

    passed = failed = 0
    for line in open(f"{root}/index.txt").read().splitlines():
        case_id, desc = line.split(" ", 1)
        if only and only not in desc:
            continue
        errors = run_case(f"{root}/{case_id}")
        if errors:
            failed += 1
            print("FAIL", case_id, desc, errors)
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", required=True, help="where bochscpu-python is installed")
    parser.add_argument("cases", help="output directory of dump_kernels or dump_elementwise")
    parser.add_argument("filter", nargs="?", help="only cases whose description contains this")
    args = parser.parse_args()
    if os.environ.get("_KERNEL_EMU_CHILD"):
        sys.exit(run_all(args.cases, args.filter))
    with tempfile.TemporaryDirectory() as work:
        shim = prepare(args.site, work)
        env = dict(os.environ, _KERNEL_EMU_CHILD="1", LD_PRELOAD=shim,
                   PYTHONPATH=os.pathsep.join([work, args.site]))
        # nanobind reports leaks at exit; they are harmless here.
        proc = subprocess.run([sys.executable] + sys.argv, env=env, stderr=subprocess.PIPE,
                              text=True)
        for line in proc.stderr.splitlines():
            if "leaked" not in line and "nanobind" not in line:
                print(line, file=sys.stderr)
        sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
