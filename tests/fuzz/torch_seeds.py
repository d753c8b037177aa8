"""torch_seeds.py ZIPDIR PICKLEDIR: seeds for fuzz_zip and fuzz_pickle,
written by torch itself: small checkpoints in both formats (a state dict,
views, tied weights, nested dicts, a bare tensor, every dtype), their
data.pkl pickles, and a zip64 one."""
import collections
import io
import os
import sys
import zipfile

import torch

zdir, pdir = sys.argv[1:]
base = torch.arange(24, dtype=torch.float32)
objs = [
    collections.OrderedDict(w=torch.ones(2, 3), b=torch.zeros(2)),
    {"sd": {"a": base[3:9].view(2, 3), "t": base[:12].view(3, 4).t()},
     "tied": base, "tied2": base, "epoch": 3, "lr": 0.5, "s": "x",
     "opt": {"param_groups": [{"lr": 0.1, "params": [0, 1]}]}},
    base[2:5],
    {str(d): torch.ones(2, dtype=d) for d in (
        torch.float64, torch.float16, torch.bfloat16, torch.int8,
        torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
        torch.complex64)},
    {"p": torch.nn.Parameter(torch.ones(2)), "dt": torch.float16},
]
n = 0
for i, o in enumerate(objs):
    for proto in (2, 4):
        b = io.BytesIO()
        torch.save(o, b, pickle_protocol=proto)
        open(os.path.join(zdir, "seed%03d" % n), "wb").write(b.getvalue())
        z = zipfile.ZipFile(io.BytesIO(b.getvalue()))
        pkl = [x for x in z.namelist() if x.endswith("/data.pkl")][0]
        open(os.path.join(pdir, "pkl%03d" % n), "wb").write(z.read(pkl))
        b = io.BytesIO()
        torch.save(o, b, pickle_protocol=proto,
                   _use_new_zipfile_serialization=False)
        open(os.path.join(pdir, "seed%03d" % n), "wb").write(b.getvalue())
        n += 1
# a zip64 directory (what torch's writer makes for big files), small
b = io.BytesIO()
with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
    with z.open("a/data.pkl", "w", force_zip64=True) as f:
        f.write(open(os.path.join(pdir, "pkl000"), "rb").read())
open(os.path.join(zdir, "zip64"), "wb").write(b.getvalue())
print("fuzz: %d torch seeds each" % n)
