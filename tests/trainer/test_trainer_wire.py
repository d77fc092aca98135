"""What ranks send each other outside the gradient exchange (predictions, RNG states, the
optimizer state) is data, never code: a peer on the rendezvous that sends a pickle with a
payload gets a refusal naming it, and nothing it carried runs."""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lanenb_trainer.engines import wire
from lanenb_trainer.engines.wire import UnsafePayloadError

TRAINER = Path(__file__).resolve().parents[2] / "trainer"


class _Opens:
    """Unpickling this calls ``open(path, "w")``: a file appears where code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_plain_data_and_tensors_cross_unchanged():
    value = {"rng": torch.get_rng_state(), "tally": [1.5, 3, None], "seen": True,
             "preds": [(0, {"lanes": [[1, -2]], "raw_file": "a.jpg", "run_time": 3.2})],
             "weights": collections.OrderedDict(w=torch.arange(6.0).reshape(2, 3)), "pair": (1, "x")}
    back = wire.decode(wire.encode(value))
    assert back.keys() == value.keys()
    assert torch.equal(back["rng"], value["rng"]) and torch.equal(back["weights"]["w"], value["weights"]["w"])
    assert isinstance(back["weights"], collections.OrderedDict)
    assert (back["tally"], back["seen"], back["preds"], back["pair"]) == \
        (value["tally"], value["seen"], value["preds"], value["pair"])
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.ones(3))], lr=0.1, momentum=0.9)
    optimizer.param_groups[0]["params"][0].grad = torch.ones(3)
    optimizer.step()
    state = wire.decode(wire.encode(optimizer.state_dict()))
    assert torch.equal(state["state"][0]["momentum_buffer"], torch.ones(3))
    assert state["param_groups"][0]["lr"] == 0.1


def test_a_payload_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "ran"
    refusal = (r"rank 1 sent \d+ bytes that are not plain data .*"
               r"refused without running them \(it names (builtins|io)\.open\)")
    with pytest.raises(UnsafePayloadError, match=refusal):
        wire.decode(wire.encode({"x": _Opens(str(marker))}), rank=1)
    assert not marker.exists()
    with pytest.raises(UnsafePayloadError, match="rank 0 sent 5 bytes"):
        wire.decode(torch.tensor(list(b"junk!"), dtype=torch.uint8), rank=0)


PROGRAM = """
import os
import sys
from pathlib import Path
import torch
from lanenb_trainer.engines import get_engine
from lanenb_trainer.engines.wire import UnsafePayloadError

class Opens:
    def __init__(self, path): self.path = path
    def __reduce__(self): return (open, (self.path, "w"))

engine = get_engine(sys.argv[1]).init()
model = torch.nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
if engine.rank == 0:  # only rank 0 has momentum (a resumed run's state): prepare sends it to the others
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
model, optimizer = engine.prepare(model, optimizer)
buffers = [s["momentum_buffer"].sum().item() for s in optimizer.state_dict()["state"].values()]
print(f"{engine.rank} momentum {sorted(round(b, 4) for b in buffers)}", flush=True)
gathered = engine.gather_objects({'rank': engine.rank, 't': torch.full((2,), engine.rank)})
print(f"{engine.rank} gathered {gathered}", flush=True)
try:
    engine.gather_objects(Opens(sys.argv[2]) if engine.rank == 1 else None)
    print(f"{engine.rank} accepted", flush=True)
except UnsafePayloadError as exc:
    print(f"{engine.rank} refused: {exc}", flush=True)
engine.barrier()
if engine.name == "ddp":
    # leave without tearing the gloo world down: what is tested is above, and destroying a world
    # this short-lived aborts now and then in this torch build ("terminate called without an
    # active exception", with the code before the wire format too)
    os._exit(0)
engine.shutdown()  # Horovod: MPI must finalize, or mpirun reports the rank as exiting improperly
"""


def _mpirun(tmp_path: Path, engine: str) -> tuple[list[str], Path]:
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun missing")
    prog = tmp_path / "peers.py"
    prog.write_text(PROGRAM)
    marker = tmp_path / "ran"
    env_args = ["-x", f"PYTHONPATH={TRAINER}", "-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=" + str(_port())]
    out = subprocess.run(["mpirun", "--allow-run-as-root", "-np", "2", "--oversubscribe", "--tag-output", "--mca",
                          "mpi_yield_when_idle", "1", *env_args, sys.executable, str(prog), engine, str(marker)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    tagged = re.split(r"\[\d+,\d+\]<std(?:out|err)>:", out.stdout)
    return sorted(part.strip() for part in tagged if part.strip()), marker


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check(lines: list[str], marker: Path) -> None:
    momentum = [line for line in lines if " momentum " in line]
    assert len(momentum) == 2 and momentum[0].split(" ", 1)[1] == momentum[1].split(" ", 1)[1] != "momentum []", lines
    gathered = [line for line in lines if " gathered " in line]
    assert all("{'rank': 0, 't': tensor([0, 0])}, {'rank': 1, 't': tensor([1, 1])}" in g for g in gathered), lines
    refused = [line for line in lines if " refused: " in line]
    assert len(refused) == 2 and all("rank 1 sent" in r and "refused without running them" in r for r in refused), lines
    assert not marker.exists(), "a peer's pickle ran on another rank"


def test_ddp_ranks_exchange_data_not_code(tmp_path):
    _check(*_mpirun(tmp_path, "ddp"))


@pytest.mark.horovod
def test_horovod_ranks_exchange_data_not_code(tmp_path):
    pytest.importorskip("horovod.torch")
    _check(*_mpirun(tmp_path, "horovod"))
