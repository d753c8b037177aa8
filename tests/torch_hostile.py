"""torch_hostile.py: crafted PyTorch checkpoints the mount tests (and
tests/fuzz/torch_seeds.py) share, written byte by byte around what
torch.save writes (torch cannot write a bad one):

- zip_insert_gap: a zip with N bytes inserted after one record's data,
  the central directory's offsets moved so the archive stays valid (a
  gap no writer leaves: torch.load reads it right);
- zip_with_byteorder: a copy with a byteorder record saying anything;
- pickle_*: object pickles written with opcodes: views with stride 0
  over a 1-byte storage, dicts whose keys Python holds equal, a float
  key, a FRAME longer than the pickle.
Standard library only.
"""
import struct
import zipfile


def _cd_entries(b, cd_off, count):
    """(offset of each central directory entry's local header field)."""
    out, p = [], cd_off
    for _ in range(count):
        assert b[p:p + 4] == b"PK\x01\x02"
        nl, xl, cl = struct.unpack_from("<HHH", b, p + 28)
        out.append(p + 42)
        p += 46 + nl + xl + cl
    return out


def zip_insert_gap(src, dst, entry, gap):
    """Copy the zip src to dst with the bytes gap inserted after entry's
    data; every offset past it moved.  Returns dst."""
    with zipfile.ZipFile(src) as z:
        info = z.getinfo(entry)
        count = len(z.infolist())
    b = bytearray(open(src, "rb").read())
    h = info.header_offset
    nl, xl = struct.unpack_from("<HH", b, h + 26)
    at = h + 30 + nl + xl + info.file_size
    e = b.rfind(b"PK\x05\x06")
    cd_off = struct.unpack_from("<I", b, e + 16)[0]
    loc = b.rfind(b"PK\x06\x07", 0, e)
    if loc >= 0:
        e64 = struct.unpack_from("<Q", b, loc + 8)[0]
        cd_off = struct.unpack_from("<Q", b, e64 + 48)[0]
    for f in _cd_entries(b, cd_off, count):
        v = struct.unpack_from("<I", b, f)[0]
        assert v != 0xffffffff
        if v >= at:
            struct.pack_into("<I", b, f, v + len(gap))
    struct.pack_into("<I", b, e + 16, cd_off + len(gap))
    if loc >= 0:
        struct.pack_into("<Q", b, e64 + 48, cd_off + len(gap))
        struct.pack_into("<Q", b, loc + 8, e64 + len(gap))
    b[at:at] = gap
    with open(dst, "wb") as f:
        f.write(b)
    return dst


def zip_with_byteorder(src, dst, value):
    """src's records copied (stored) to dst, with PREFIX/byteorder saying
    value (torch 1.13 writes none; later torch writes "little")."""
    with zipfile.ZipFile(src) as z, \
            zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as o:
        prefix = z.namelist()[0].split("/")[0]
        for n in z.namelist():
            o.writestr(n, z.read(n))
            if n.endswith("/data.pkl"):
                o.writestr(prefix + "/byteorder", value)
    return dst


def _uni(s):
    return b"X" + struct.pack("<I", len(s)) + s.encode()


def _num(v):
    return b"\x8a\x08" + struct.pack("<Q", v)


def _tensor(key, cls, numel, offset, sizes, strides):
    """_rebuild_tensor_v2 of storage key, onto the stack."""
    return (b"ctorch._utils\n_rebuild_tensor_v2\n((" + _uni("storage") +
            b"ctorch\n" + cls.encode() + b"\n" + _uni(key) + _uni("cpu") +
            _num(numel) + b"tQ" + _num(offset) +
            b"(" + b"".join(_num(s) for s in sizes) + b"t" +
            b"(" + b"".join(_num(s) for s in strides) + b"t" +
            b"\x89ccollections\nOrderedDict\n)RtR")


def pickle_dict(items):
    """data.pkl of a dict: items is a list of (key opcode bytes, value
    opcode bytes)."""
    return (b"\x80\x02}(" + b"".join(k + v for k, v in items) + b"u.")


def key_str(s):
    return _uni(s)


def key_int(i):
    return b"J" + struct.pack("<i", i)


def key_bool(v):
    return b"\x88" if v else b"\x89"


def key_float(f):
    return b"G" + struct.pack(">d", f)


def val_tensor(key, numel=1, offset=0, sizes=(1,), strides=(1,),
               cls="FloatStorage"):
    return _tensor(key, cls, numel, offset, sizes, strides)


def pickle_expand(n_tensors, numel=(1 << 61) - 1):
    """n_tensors views with stride 0 over one 1-byte storage '0': what
    expand() makes, numel elements each; and "ok", the storage's byte."""
    return pickle_dict([(key_str("t%d" % i),
                         val_tensor("0", 1, 0, (numel,), (0,),
                                    "ByteStorage"))
                        for i in range(n_tensors)] +
                       [(key_str("ok"), val_tensor("0", 1, 0, (1,), (1,),
                                                   "ByteStorage"))])


def pickle_frame_past_end(n=1 << 40):
    """A protocol-4 pickle whose FRAME claims n bytes."""
    body = b"}."
    return b"\x80\x04\x95" + struct.pack("<Q", n) + body
