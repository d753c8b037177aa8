"""test_install.py: what `meson install` and the packages ship.

Run after `meson install`, by `meson test --suite install` (plain `meson
test` leaves it out; scripts/run-tests.sh does both): every public
header (include/stfs/*.h) is installed and compiles alone under -pedantic
as C99 and C++11; examples/stfs-list.c
builds against the installed libstfs through pkg-config, shared and static,
and lists exactly what `stfs inspect --json` lists; the man page documents
every option and command that `stfs --help` shows; the documented fstab
line mounts through mount(8); the Debian packages
build with dpkg-buildpackage, install, mount a model and uninstall; the RPM
spec builds with rpmbuild.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [TESTS_DIR + "/fixtures", TESTS_DIR + "/servers"]
import stfstest as T  # noqa: E402

ROOT = os.path.abspath(os.path.join(TESTS_DIR, ".."))
SAMPLE = os.path.join(ROOT, "examples", "tiny-llama.safetensors")
# The public headers: every one must be installed and packaged.
PUBLIC = sorted("/usr/include/stfs/" + os.path.basename(h) for h in
                glob.glob(os.path.join(ROOT, "include", "stfs", "*.h")))


def sh(*args, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    assert r.returncode == 0, "%s: exit %d\n%s%s" % (
        " ".join(args), r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


def pkgconf(*args):
    return sh("pkg-config", *args).split()


def inspect_lines(stfs, src):
    info = json.loads(sh(stfs, "inspect", "--json", src))
    return ["%s %s [%s] %d %s" % (t["name"], t["dtype"],
                                  ",".join(map(str, t["shape"])),
                                  t["bytes"], t["file"])
            for t in info["tensors"]]


def test_header_pedantic(d):
    cflags = pkgconf("--cflags", "stfs")
    assert len(PUBLIC) >= 4, PUBLIC
    for h in PUBLIC:
        name = os.path.basename(h)
        src = os.path.join(d, "h-%s.c" % name[:-2])
        with open(src, "w") as f:
            f.write("#include <stfs/%s>\nint main(void) "
                    "{ return 0; }\n" % name)
        sh("cc", "-std=c99", "-pedantic-errors", "-Wall", "-Wextra",
           "-Werror", *cflags, src, "-o", os.path.join(d, "h"),
           *pkgconf("--libs", "stfs"))
        cpp = src[:-2] + ".cc"
        shutil.copy(src, cpp)
        sh("g++", "-std=c++11", "-pedantic-errors", "-Wall", "-Wextra",
           "-Werror", "-fsyntax-only", *cflags, cpp)
    src = os.path.join(d, "h.c")
    with open(src, "w") as f:
        f.write("#include <stfs/stfs.h>\nint main(void) "
                "{ return stfs_dtype_bits(STFS_DTYPE_BF16) != 16; }\n")
    sh("cc", "-std=c99", "-pedantic-errors", "-Wall", "-Wextra", "-Werror",
       *cflags, src, "-o", os.path.join(d, "h"), *pkgconf("--libs", "stfs"))
    sh(os.path.join(d, "h"))
    cpp = os.path.join(d, "h.cc")
    shutil.copy(src, cpp)
    sh("g++", "-std=c++11", "-pedantic-errors", "-Wall", "-Wextra",
       "-Werror", "-fsyntax-only", *cflags, cpp)


def test_pkgconfig_program(d):
    assert sh("pkg-config", "--modversion", "stfs").strip() == "0.2.0"
    prog = os.path.join(ROOT, "examples", "stfs-list.c")
    shared = os.path.join(d, "stfs-list")
    sh("cc", prog, *pkgconf("--cflags", "--libs", "stfs"), "-o", shared)
    ldd = sh("ldd", shared)
    assert re.search(r"libstfs\.so\.2 => /\S+", ldd), ldd
    static = os.path.join(d, "stfs-list-static")
    libdir = sh("pkg-config", "--variable=libdir", "stfs").strip()
    sh("cc", prog, *pkgconf("--cflags", "stfs"),
       os.path.join(libdir, "libstfs.a"),
       *pkgconf("--libs", "json-c", "libcurl", "libcrypto", "expat"),
       "-lm", "-pthread", "-o",
       static)
    assert "libstfs" not in sh("ldd", static)
    for src in (SAMPLE, os.path.join(T.REAL, "jl-sharded")):
        want = inspect_lines(T.STFS, src)
        assert len(want) > 20
        for exe in (shared, static):
            got = sh(exe, src).splitlines()
            assert got == want, "%s on %s: %s != %s" % (
                exe, src, got[:2], want[:2])
    bad = os.path.join(T.REAL, "invalid-real-world")
    first = sorted(glob.glob(os.path.join(bad, "*.safetensors")))[0]
    r = subprocess.run([shared, first], capture_output=True, text=True)
    assert r.returncode == 1 and "stfs-list: " in r.stderr, r


def test_man_page(d):
    path = sh("man", "-w", "stfs").strip()
    assert path.endswith(("stfs.1", "stfs.1.gz")), path
    text = sh("man", "-P", "cat", "stfs", env=dict(os.environ,
                                                    MANWIDTH="200"))
    text = re.sub(r".\x08", "", text)
    helptext = sh(T.STFS, "--help")
    opts = set(re.findall(r"-o ([a-z_]+)", helptext))
    opts |= set(re.findall(r"(?:,|-o )([a-z_]+)=N", helptext))
    assert {"flat", "uid", "gid", "umask", "threads", "readahead",
            "log"} <= opts, opts
    for o in sorted(opts):
        assert re.search(r"\b%s\b" % o, text), "man page lacks %s" % o
    # every format and view the code mounts is named by both
    for word in ("PyTorch", "GGUF", "pytorch_model.bin", "%repo/",
                 "user.pytorch.type", "user.gguf.type", "hf://", "s3://"):
        assert word in helptext, "stfs --help lacks %r" % word
        assert word in text, "man page lacks %r" % word
    for cmd in ("stfs mount", "stfs inspect", "stfs umount", "--json",
                "%header.json", "user.safetensors.dtype", "EXIT STATUS",
                "fstab"):
        assert cmd in text, "man page lacks %r" % cmd


def test_fstab_line(d, mnt):
    """The fstab line of docs/deploy.md, through mount(8) --fstab."""
    fstab = os.path.join(d, "fstab")
    with open(fstab, "w") as f:
        f.write("# test fstab\n%s %s fuse.stfs ro,allow_other,nofail,"
                "_netdev,noauto,x-systemd.automount,x-systemd.idle-timeout="
                "600,threads=2 0 0\n" % (SAMPLE, mnt))
    sh("mount", "--fstab", fstab, mnt)
    T._mounts.append(mnt)
    try:
        assert T.is_mount(mnt)
        with open(os.path.join(mnt, "model", "norm", "weight"), "rb") as f:
            assert len(f.read()) == 128
        opts = [l.split() for l in open("/proc/self/mounts")
                if l.split()[1] == os.path.realpath(mnt)][0][3]
        assert "allow_other" in opts and opts.startswith("ro"), opts
    finally:
        sh("umount", mnt)
    assert not T.is_mount(mnt)
    assert T.wait_gone(mnt), "daemon still running after umount"


def test_debian_packages(d, mnt):
    out = os.path.join(d, "debs")
    sh("bash", os.path.join(ROOT, "scripts", "build-deb.sh"), out)
    debs = sorted(glob.glob(os.path.join(out, "*.deb")))
    names = [os.path.basename(x).split("_")[0] for x in debs]
    for want in ("stfs", "libstfs2", "libstfs-dev"):
        assert want in names, names
    install = [x for x in debs if "dbgsym" not in x]
    sh("dpkg", "-i", *install)
    try:
        assert "stfs 0.2.0" in sh("/usr/bin/stfs", "--version")
        files = sh("dpkg", "-L", "libstfs-dev")
        for h in PUBLIC:
            assert h in files, h
        assert re.search(r"/usr/lib/[^/]+/pkgconfig/stfs.pc", files)
        assert "/usr/share/man/man1/stfs.1.gz" in sh("dpkg", "-L", "stfs")
        p = subprocess.Popen(["/usr/bin/stfs", "mount", "-f", SAMPLE, mnt],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        T._procs.append(p)
        T._mounts.append(mnt)
        assert T.wait_mount(mnt, p), p.stderr.read()
        with open(os.path.join(mnt, "lm_head", "weight"), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        with open(SAMPLE, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            info = json.loads(f.read(n))["lm_head.weight"]
            f.seek(8 + n + info["data_offsets"][0])
            want = hashlib.sha256(f.read(info["data_offsets"][1] -
                                         info["data_offsets"][0])).hexdigest()
        assert got == want
        T.stop_fg(p, mnt)
    finally:
        subprocess.run(["dpkg", "--purge", "stfs", "libstfs-dev",
                        "libstfs2"], capture_output=True)
    assert not os.path.exists("/usr/bin/stfs")


def test_rpm_spec(d):
    out = os.path.join(d, "rpms")
    sh("bash", os.path.join(ROOT, "scripts", "build-rpm.sh"), out)
    rpms = sorted(glob.glob(os.path.join(out, "*.rpm")))
    assert len(rpms) == 3, rpms
    listing = sh("rpm", "-qlp", *rpms)
    for f in ["/usr/bin/stfs", "stfs.pc", "libstfs.so.2",
              "/usr/share/man/man1/stfs.1"] + PUBLIC:
        assert f in listing, f


def main():
    return T.run_tests([
        test_header_pedantic,
        test_pkgconfig_program,
        test_man_page,
        test_fstab_line,
        test_debian_packages,
        test_rpm_spec,
    ])


if __name__ == "__main__":
    sys.exit(main())
