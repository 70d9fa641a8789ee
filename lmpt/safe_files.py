"""The one place lmpt reads its binary and YAML files: as data, never as code. Weights are safetensors; other
torch files load with `weights_only=True`; YAML through OmegaConf's safe loader; the metadata of a sharded
checkpoint through an unpickler that knows only torch.distributed.checkpoint's plain records. A file that
would need more (a pickle that can call `os.system`, a `!!python/...` tag) is refused, naming the file."""

from __future__ import annotations

import json
import os
import pickle
import re
import secrets
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from safetensors import SafetensorError, safe_open

from lmpt.errors import LmptError
from lmpt.private_api import set_nested_element

if TYPE_CHECKING:
    import torch

WEIGHTS_SUFFIX = ".safetensors"
PICKLE_SUFFIX = ".pt"


class UnsafeFile(LmptError):
    """A file that could run code if loaded the usual way (a pickle of arbitrary objects, a `!!python` tag)."""


def _refuse_code(path: Path, what: str) -> UnsafeFile:
    return UnsafeFile(
        f"{path} holds {what}, which lmpt never loads (it could run code): refusing it; "
        "use files lmpt wrote itself, or delete this one"
    )


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` fills a file beside `path`, which is then synced and renamed into place: `path` is whole or
    absent, never torn. Each call stages in a file of its own, so writers racing for `path` never share one (the
    last rename wins, whole). A failed write (a full disk) is one line."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except (OSError, SafetensorError) as exc:
        reason = write_failure(exc)
        if reason is None:
            raise
        raise LmptError(f"could not write {path} ({reason}): free space and run the same command again") from exc
    finally:
        tmp.unlink(missing_ok=True)


def save_weights(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """`tensors` as a safetensors file at `path` (string `metadata` in its header, keys sorted), written
    atomically (`write_atomically`)."""
    import safetensors.torch

    def write(tmp: Path) -> None:
        contiguous = {k: v.detach().contiguous() for k, v in tensors.items()}
        safetensors.torch.save_file(contiguous, str(tmp), metadata=metadata)
        with open(tmp, "r+b") as f:
            _sort_metadata(f)

    write_atomically(path, write)


def _sort_metadata(f: BinaryIO) -> None:
    """Rewrite a just-written safetensors header with its metadata keys sorted, in place. safetensors writes
    them in a random order (a Rust HashMap: safetensors#584), so equal weights would give different bytes.
    The entries only move, so the header keeps its length and every tensor's offsets."""
    (length,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(length))
    metadata = header.pop("__metadata__", None)
    if not metadata:
        return
    canonical = json.dumps(
        {"__metadata__": dict(sorted(metadata.items())), **header}, separators=(",", ":"), ensure_ascii=False
    ).encode()
    if len(canonical) <= length:  # always, as serde_json writes the same characters: never risk a torn header
        f.seek(8)
        f.write(canonical.ljust(length, b" "))


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file inside `directory` durable (a commit is only as safe as its directory entry)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_weights(path: Path, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """A safetensors file's tensors; anything else (a pickle under the same name, a torn file) is refused."""
    import safetensors.torch

    try:
        return safetensors.torch.load_file(str(path), device=str(device))
    except (SafetensorError, OSError, ValueError) as exc:
        raise LmptError(
            f"{path} is not a readable safetensors file ({_first_line(exc)}): it was not written by lmpt or is damaged"
        ) from None


def weights_metadata(path: Path) -> dict[str, str]:
    """The string metadata in a safetensors file's header (without reading its tensors)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return dict(f.metadata() or {})
    except (SafetensorError, OSError, ValueError) as exc:
        raise LmptError(
            f"{path} is not a readable safetensors file ({_first_line(exc)}): it was not written by lmpt or is damaged"
        ) from None


def load_torch(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """A `torch.save` file of tensors and plain Python data, loaded with `weights_only=True`."""
    import torch

    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc) or "Unsupported global" in str(exc):
            raise _refuse_code(path, "Python objects beyond tensors and plain data") from None
        raise LmptError(f"{path} could not be read ({_first_line(exc)}): it is not a file lmpt saved") from None
    except (RuntimeError, EOFError, OSError, ValueError) as exc:
        raise LmptError(f"{path} could not be read ({_first_line(exc)}): it is not a file lmpt saved") from None


def load_file_by_suffix(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """`.safetensors` as tensors, `.pt` through `load_torch`: how every part of a checkpoint is read."""
    if path.suffix == WEIGHTS_SUFFIX:
        return load_weights(path, map_location)
    return load_torch(path, map_location)


def load_yaml(path: Path) -> DictConfig | ListConfig:
    """A YAML file of plain data; a `!!python/...` tag or broken YAML is refused naming the file."""
    try:
        return OmegaConf.load(path)
    except yaml.constructor.ConstructorError:
        raise _refuse_code(path, "a YAML tag that builds a Python object") from None
    except yaml.YAMLError as exc:
        raise LmptError(f"{path} is not valid YAML ({_first_line(exc)}): fix it or move it away") from None


def write_failure(exc: BaseException) -> str | None:
    """The operating system's reason when `exc` is a failed write (a full disk, a quota), else None. torch.save
    wraps the OSError of its file in a RuntimeError; safetensors reports it in its own error's message."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError):
            return cause.strerror or str(cause)
        code = re.search(r"os error (\d+)", str(cause)) if isinstance(cause, SafetensorError) else None
        if code:
            return os.strerror(int(code.group(1)))
        cause = cause.__cause__ or cause.__context__
    return None


def interrupted(exc: BaseException) -> bool:
    """`exc` is, or was raised while handling, a KeyboardInterrupt (torch.save wraps one from its file)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- sharded (FSDP) checkpoints: torch.distributed.checkpoint pickles its metadata -------------------------
_DCP_RECORDS = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "StorageMeta",
        "MetadataIndex",
        "TensorProperties",
        "TensorStorageMetadata",
        "ChunkStorageMetadata",
        "BytesStorageMetadata",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("collections", "OrderedDict"),
}


class _DcpMetadataUnpickler(pickle.Unpickler):
    """Only the plain records DCP's metadata holds (and torch dtypes): any other global is refused."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        dtype = module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        if (module, name) in _DCP_RECORDS or dtype:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def read_dcp_metadata(path: Path) -> Any:
    """The `.metadata` file of a torch.distributed.checkpoint directory, through the restricted unpickler."""
    try:
        with open(path, "rb") as f:
            return _DcpMetadataUnpickler(f).load()
    except pickle.UnpicklingError:
        raise _refuse_code(path, "Python objects beyond a sharded checkpoint's metadata") from None
    except (EOFError, OSError, ValueError, TypeError, AttributeError) as exc:
        raise LmptError(f"{path} could not be read ({_first_line(exc)}): it is not a file lmpt saved") from None


def load_sharded(state: dict, directory: Path) -> None:
    """Fill `state` in place from the torch.distributed.checkpoint `directory`, reading no code: its metadata
    through `read_dcp_metadata`, tensors and the optimizer's plain values with `weights_only=True`."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
    from torch.distributed.checkpoint.storage import StorageMeta

    class SafeReader(dcp.FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            rank = kwargs.get("rank")
            metadata = read_dcp_metadata(Path(self._get_metadata_path(rank)))
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    class SafePlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: Any, value: Any) -> None:
            try:
                loaded = torch.load(value, weights_only=True)
            except pickle.UnpicklingError:
                raise _refuse_code(directory, "Python objects beyond tensors and plain data") from None
            if self.flatten_state_dict:
                set_nested_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], loaded)
            else:
                self.state_dict[read_item.dest_index.fqn] = loaded

    read_dcp_metadata(directory / ".metadata")  # refused here, in one line, rather than deep inside DCP
    try:
        dcp.load(state, storage_reader=SafeReader(str(directory)), planner=SafePlanner())
    except CheckpointException as exc:  # DCP gathers each rank's failure into one BaseException
        causes = [failure[0] for failure in exc.failures.values()]
        refusal = next((c for c in causes if isinstance(c, LmptError)), None)
        if refusal is not None:
            raise LmptError(str(refusal)) from None
        raise LmptError(f"the sharded checkpoint {directory} could not be read ({_first_line(causes[0])})") from None
