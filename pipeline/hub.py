"""``kolectra export REF --to DIR [--push REPO_ID]``: a checkpoint's model as a Hub-ready folder.

The folder holds one network of a checkpoint artifact (``hf/discriminator`` by default, the one to
fine-tune; ``--role generator`` for the masked LM): its weights (safetensors), config, tokenizer
files and a model card whose metadata is valid for the Hugging Face Hub (:mod:`model.card`: Hub
ids only, ``--dataset`` and ``--base-model`` when the user names them). The card's body, the
training facts and lineage written at pretraining, is kept; a line says which artifact it came
from. A masked LM's folder (the generator, or an MLM ablation's discriminator), whose card's
``pipeline_tag`` is fill-mask, reads ``[MASK]`` in text as the mask (:func:`mask_in_text`); every
other folder keeps the vocabulary's "text is data". The artifact is verified before anything is copied; ``--to`` inside it, inside the root or
the store cache is refused, and so is a ``--push`` id the Hub would refuse, before anything is written.
A local ``--to`` is written beside itself and renamed into place whole (:func:`staged`), or into an empty
``--to`` given moved file by file, config.json last: a process killed midway leaves no ``--to`` (no
config.json in one given), and the next export there sweeps what it wrote.
``--to`` in a store (``s3://``, ``gs://``: :func:`exported`) is written in a local scratch folder and
uploaded; its bucket is checked and a folder holding objects refused first, and what was uploaded goes
if the upload fails. A bucket has no rename: a kill during the upload leaves the files sent so far, but
never config.json (sent last), and the next export's refusal says so.

``--push REPO_ID`` uploads the folder with ``huggingface_hub``: one commit of
``CommitOperationAdd`` per file (:func:`operations`), the repository created if absent.
``--dry-run`` stops there and prints what the commit would hold, which is also how the tests check
it (no network here), and warns on stderr of what would stop or shame the real push: no token, or a
public push of a model whose pretraining health says it learned nothing. kolectra otherwise runs
with ``HF_HUB_OFFLINE=1``; only a real push goes online, and a Hub that cannot be reached (network
down, refused, timed out) or a token it refuses is an environment problem, one line and exit 2.

The card's body is the pretraining card, which may name local folders (``train.init_from``): a
published card names such a folder by its last part only (:func:`no_local_paths`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
from pathlib import Path
from typing import Iterator

from kolectra.core import folder_uploads, scratch, storage, store_objects
from kolectra.core.config import ConfigError
from kolectra.core.errors import EnvironmentProblem
from kolectra.core.tokens import MODEL_INPUT_NAMES
from kolectra.model.card import front_matter, hub_id
from kolectra.model.checkpoint_writes import CheckpointWriteError, synced, writing_into  # these two: torch-free
from kolectra.model.export_files import (
    FILL_MASK,
    fit_max_length,
    mask_in_text,
    one_segment_inputs,
    one_segment_pairs,
    untrained_positions,
)
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.roots import artifact_around

ROLES = ("discriminator", "generator")
# how a user stores a token: huggingface_hub's own command (`huggingface-cli` went in its 1.0; kolectra
# takes >= 2.4); `kolectra export --help` names it too
LOGIN = "hf auth login"
# what a Hub model folder needs; anything else in hf/<role> (none today) stays behind
FILES = ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "vocab.txt")


def export(store: Store, ref: str, dest: Path, role: str = "discriminator", datasets: list[str] | None = None,
           base_model: str | None = None, push: str | None = None, durable: bool = True) -> tuple[Artifact, Path]:
    """Write the Hub-ready folder ``dest`` from checkpoint ``ref``; returns (the artifact, ``dest``).
    ``push``, the repository a push will go to, is checked first, like every Hub id. ``durable``: its files
    and folder are on the disk (``fsync``) before it is renamed into place (:func:`on_disk`); False for a
    scratch folder that is uploaded."""
    if role not in ROLES:
        raise ConfigError(f"--role: expected one of {', '.join(ROLES)}, got {role!r}")
    for d in datasets or []:
        hub_id(d, "--dataset")  # refused before anything is written
    if base_model:
        hub_id(base_model, "--base-model")
    if push is not None:
        hub_id(push, "--push")
    art = store.require(ref, "checkpoint")
    # in a bucket: the stage's check (one listing; an object whose store checksum moved is read), then the copy of
    # hf/<role> alone, each file hashed as it arrives (the full check read every object, the other network's and the
    # logs too, and the copy all of them again); on a disk root the quick check is the full one
    problems = store.verify(art, quick=True)
    if problems:
        raise ArtifactError(f"export: {art.path} fails verification: {problems[0]}")
    copy = store.local(art, lambda f: f.startswith(f"hf/{role}/"))
    src = copy / "hf" / role
    if not (src / "config.json").is_file():
        raise ArtifactError(f"export: {art.path} has no hf/{role}/config.json")
    dest = Path(dest)
    config = readable(src)  # before anything is written: a half-written --to refuses the next try
    outside_roots(dest, [copy, *managed_folders(store)])
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(f"--to {dest}: exists and is not an empty folder (the export never overwrites)")
    cls_name = (config.get("architectures") or ["ElectraForPreTraining"])[0]
    masked_lm = cls_name == "ElectraForMaskedLM"  # a generator, or an MLM ablation's discriminator
    objective = str(art.manifest.get("config", {}).get("objective", {}).get("objective", "electra"))
    folder, side = staged(dest)
    try:
        with writing_into(dest, "export"):  # names --to, not the store's file shutil.copyfile names
            notes = [FILL_MASK] if masked_lm else []
            if positions := positions_note(art, config):  # said in a card written before checkpoint 23 too
                notes.append(positions)
            _write(src, folder, config, cls_name, masked_lm, card(src / "README.md", cls_name, objective, art,
                                                                  datasets, base_model, *notes))
            if durable:
                on_disk(folder)
        if side is not None:
            changed = into_place(folder, dest)
            if durable:  # the rename itself, or the files moved into the --to given (copied where on a bind mount)
                with contextlib.suppress(OSError):  # in place already: not to be removed as a failed write
                    on_disk(changed, files=changed == dest.resolve())
    except BaseException as e:  # a full disk, an I/O error, Ctrl-C: what was written goes, so that the same
        # command can be run again (a half-written --to, weights without a tokenizer, was refused by it)
        if side is None:
            with contextlib.suppress(OSError):
                for name in (*FILES, "README.md"):
                    (folder / name).unlink(missing_ok=True)
        if isinstance(e, ConfigError):  # --to filled meanwhile (into_place): what is there is not ours
            raise
        if isinstance(e, OSError) and not e.filename:  # shutil's copy names no file where a write fails
            e.add_note(f"while writing the export into {dest}")
        e.add_note("the files written into --to were removed, so the same command can run again")
        raise
    finally:
        if side is not None:  # empty once the export is in place; else what was written
            shutil.rmtree(side, ignore_errors=True)
    return art, dest


@contextlib.contextmanager
def exported(store: Store, ref: str, to: str | Path, role: str = "discriminator", datasets: list[str] | None = None,
             base_model: str | None = None, push: str | None = None) -> Iterator[tuple[Artifact, Path, Path | str]]:
    """:func:`export` to ``to``: a local folder, or a folder in a store (``s3://``, ``gs://``), which is
    checked first (:func:`store_folder`), written in a local scratch folder and uploaded
    (:func:`core.folder_uploads.upload_folder`). Yields (the artifact, the local folder, where the export is: the folder or the
    URL); a push in the block reads the local folder, which for a store is removed after it. ``to`` inside
    an artifact of any root (its files would go into a published artifact) is refused first."""
    if storage.is_url(to):  # before artifact_around's request a level: a store not answering waited each out
        storage.check_bucket(str(to))
    if (inside := artifact_around(to)) is not None:
        raise ConfigError(f"--to {to}: inside {inside}, which kolectra manages (an artifact, a root or its cache): "
                          "write the export somewhere else")
    if not storage.is_url(to):
        if why := storage.one_slash_problem(to, "--to"):  # s3:/b/x: written to ./s3:/b/x, exit 0
            raise ConfigError(why)
        art, folder = export(store, ref, Path(storage.local_path(to)), role, datasets, base_model, push)
        yield art, folder, folder
        return
    url = store_folder(store, str(to), bucket_checked=True)
    with scratch.temporary_directory("export") as tmp:
        try:
            art, folder = export(store, ref, Path(tmp) / "export", role, datasets, base_model, push, durable=False)
        except CheckpointWriteError as e:  # the line names the scratch folder, not --to
            e.add_note(f"--to {to} is written in that local scratch folder first, then uploaded: point TMPDIR "
                       "at a disk with room")
            raise
        folder_uploads.upload_folder(folder, url, last="config.json")  # the folder was empty (store_folder)
        yield art, folder, url


def staged(dest: Path) -> tuple[Path, Path | None]:
    """(the folder to write the export of ``--to`` ``dest`` in, the scratch folder beside ``dest`` that
    holds it, or None where it is ``dest`` itself). The export is written beside ``dest``, on its disk,
    and renamed into place whole, or moved into the empty folder given, config.json last (:func:`into_place`):
    a process killed midway (``kill -9``, an OOM kill:
    no clean-up runs) left config.json and the weights without the tokenizer in ``dest``, a folder
    ``AutoModel`` loads; now it leaves a ``kolectra-export-<pid>-...`` folder beside it, which the next
    export there sweeps (:func:`core.scratch.sweep_once`). An empty folder that is a mount point (no
    rename onto it) or whose parent refuses the scratch folder (read-only, not ours) is written in place."""
    where = dest.resolve()  # through a link to an empty folder, where the files went before
    if where.is_dir() and os.path.ismount(where):
        return dest, None
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        scratch.sweep_once(where.parent, label="export")
        side = Path(scratch.mkdtemp("export", dir=where.parent))
    except OSError as e:
        if where.is_dir():
            return dest, None
        if e.filename and Path(e.filename).parent == where.parent:  # the scratch folder's name: say --to's
            raise type(e)(e.errno, e.strerror, str(dest)) from None
        raise
    folder = side / "export"
    try:
        folder.mkdir()  # mkdtemp's folder is private (0700); this one takes the umask, as a new --to did
    except BaseException:
        shutil.rmtree(side, ignore_errors=True)
        raise
    return folder, side


def into_place(folder: Path, dest: Path) -> None:
    """Put the written export ``folder`` at ``dest``: renamed there whole where ``dest`` is a new name;
    moved into the empty folder given file by file (:func:`filled`), not renamed over it: replacing the
    folder left whoever was in it in a deleted one (``--to .``: the shell's ``ls`` showed nothing, each
    command said 'getcwd: cannot access parent directories'), and a bind mount of the same disk refused
    the rename ('Device or resource busy'). A folder that filled meanwhile refuses it (its files stay).
    Returns the folder whose entries changed: ``dest``'s parent, or ``dest`` filled."""
    where = dest.resolve()
    if where.is_dir():
        filled(folder, dest, where)
        return where
    try:
        os.rename(folder, where)
    except OSError as e:  # names the scratch folder and --to: say --to
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):  # another process wrote there meanwhile
            raise ConfigError(f"--to {dest}: exists and is not an empty folder (the export never overwrites)") from None
        raise type(e)(e.errno, e.strerror, str(dest)) from None
    return where.parent


def on_disk(folder: Path, files: bool = True) -> None:
    """Every file of the written export ``folder`` and the folder's entries flushed to the disk before it is
    renamed into place, as a checkpoint's step folder is (:func:`model.checkpoint_writes.synced`): a rename is
    atomic against a kill, not against a power loss, after which the rename can be on the disk and the files
    not (ext4's delayed allocation: empty or zeroed weights in a folder AutoModel loads; an export has no
    manifest whose hashes would catch it). Measured on a 440 MB model.safetensors (ELECTRA-Base's
    discriminator): 0.21-0.27 s more on a copy of 0.93 s. ``files`` False: the folder's entries only (a
    rename into it). A disk that refuses to sync a folder (some network and FUSE file systems: EINVAL) is
    left as it is, as the artifact store does (a file's sync failing is a write failing)."""
    for f in sorted(folder.iterdir()) if files else ():
        synced(f)
    with contextlib.suppress(OSError):
        synced(folder)


def filled(folder: Path, dest: Path, where: Path) -> None:
    """Move the written export's files from ``folder`` into the empty folder ``where`` (``--to`` given),
    config.json last (a kill midway leaves no folder AutoModel loads); on any failure what was moved in goes."""
    if any(where.iterdir()):  # another process wrote there meanwhile
        raise ConfigError(f"--to {dest}: exists and is not an empty folder (the export never overwrites)")
    moved: list[Path] = []
    try:
        for f in sorted(folder.iterdir(), key=lambda f: (f.name == "config.json", f.name)):
            moved.append(where / f.name)
            shutil.move(f, where / f.name)  # a rename on one disk, a copy across two
    except BaseException as e:
        with contextlib.suppress(OSError):
            for path in moved:
                path.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename and Path(e.filename).is_relative_to(folder):
            raise type(e)(e.errno, e.strerror, str(dest)) from None
        raise


def store_folder(store: Store, to: str, bucket_checked: bool = False) -> str:
    """``--to`` in a store, without a trailing ``/``, refused in one line before anything is written: a
    missing bucket (or a scheme kolectra has no store for; ``bucket_checked``: the caller did), a folder
    already holding objects (the export never overwrites), or one inside a store root kolectra manages."""
    if not bucket_checked:
        storage.check_bucket(to)  # before the '/' goes: 's3://' stripped is 's3:', a local path
    url = to.rstrip("/")
    root = str(store.root).rstrip("/")
    if storage.is_url(root) and (url == root or url.startswith(f"{root}/")):
        raise ConfigError(f"--to {to}: inside {root}, which kolectra manages (an artifact, a root or its cache): "
                          "write the export somewhere else")
    if held := storage.listing(url):
        # config.json goes last (folder_uploads.upload_folder): without it, what an export killed midway left
        killed = "" if "config.json" in held else (f"; it holds {len(held)} file(s) and no config.json, as an export "
                                                   "killed midway leaves: remove them, or choose another --to")
        raise ConfigError(f"--to {to}: exists and is not an empty folder (the export never overwrites){killed}")
    if store_objects.object_info(url) is not None:
        raise ConfigError(f"--to {to}: exists and is not an empty folder (the export never overwrites)")
    return url


def _write(src: Path, dest: Path, config: dict, cls_name: str, masked_lm: bool, readme: str) -> None:
    for name in FILES:
        if (src / name).is_file():
            shutil.copyfile(src / name, dest / name)
    text_is_data(dest / "tokenizer_config.json")
    positions = config.get("max_position_embeddings")  # a checkpoint before 18 said the vocabulary's 512
    if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0:
        fit_max_length(dest / "tokenizer_config.json", positions)
    one_segment_inputs(dest / "tokenizer_config.json", config.get("type_vocab_size"))  # a checkpoint before 22 kept them
    one_segment_pairs(dest / "tokenizer.json", config.get("type_vocab_size"))  # one before 23 gave B type 1
    if masked_lm:
        mask_in_text(dest / "tokenizer_config.json")
    (dest / "README.md").write_text(readme, encoding="utf-8")


def readable(src: Path) -> dict:
    """``src``'s ``config.json`` (returned), ``tokenizer_config.json`` and ``README.md``, read and checked
    before anything is written. A checkpoint from another root (a shared bucket, a download) passes
    verification whatever these hold once its manifest was rewritten to match; such a file is one line
    naming it, not an internal error after part of the folder was copied (a ``--to`` the next try refuses)."""
    found: dict = {}
    for name in ("config.json", "tokenizer_config.json", "README.md"):
        path = src / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
            found[name] = text if name == "README.md" else json.loads(text)
        except UnicodeDecodeError:
            raise ArtifactError(f"export: {path}: not UTF-8 text") from None
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep
            raise ArtifactError(f"export: {path}: not readable JSON ({str(e).splitlines()[0][:120]})") from None
        if name != "README.md" and not isinstance(found[name], dict):
            raise ArtifactError(f"export: {path}: not a JSON object")
    names = found["config.json"].get("architectures")
    if names is not None and not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise ArtifactError(f"export: {src / 'config.json'}: architectures {str(names)[:80]!r} is not a list of class names")
    return found["config.json"]


def managed_folders(store: Store) -> list[Path]:
    """The local folders kolectra keeps: the root (artifacts, builds in ``.tmp``, runs, locks) and the
    cache of a store's copies."""
    from kolectra.pipeline.store.remote_runs import cache_root  # noqa: PLC0415

    local_root = getattr(store, "_local_root", None)  # a store root's local side
    return [Path(p) for p in (store.root, local_root() if local_root else None, cache_root())
            if p is not None and not storage.is_url(str(p))]


def outside_roots(dest: Path, folders: list[Path]) -> None:
    """Refuse ``--to`` inside the exported artifact or any folder kolectra manages: a folder written
    into an artifact fails its verification (and every later fine-tune refuses it), one in
    ``ROOT/<kind>/`` or ``ROOT/.tmp/`` is a stray entry that clean-up may delete."""
    where = dest.expanduser().resolve()  # symlinks and '..' followed, as the writes would
    for folder in folders:
        inside = folder.expanduser().resolve()
        if where == inside or inside in where.parents:
            raise ConfigError(f"--to {dest}: inside {inside}, which kolectra manages (an artifact, a root or "
                              "its cache): write the export somewhere else")


def text_is_data(path: Path) -> None:
    """``split_special_tokens`` in the exported tokenizer's config, as vocabularies write it since
    vocab 6: "[MASK]" in a user's text stays text, as it does in every kolectra stage (a checkpoint
    of an older vocabulary lacks it). Likewise ``model_input_names`` (vocab 8): without it a
    ``PreTrainedTokenizerFast`` (an older SentencePiece vocabulary's class) returns no
    ``token_type_ids``, and a pair reaches the model as one segment."""
    if not path.is_file():
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(config, dict) and not {"split_special_tokens", "model_input_names"} <= config.keys():
        config.setdefault("split_special_tokens", True)
        config.setdefault("model_input_names", list(MODEL_INPUT_NAMES))
        path.write_text(json.dumps(config, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def positions_note(art: Artifact, config: dict) -> str:
    """What the card says of positions past the sequence length the checkpoint was pretrained on
    (:func:`model.export_files.untrained_positions`; "" where all were trained)."""
    stats = art.manifest.get("stats") if isinstance(art.manifest.get("stats"), dict) else {}
    train = (art.manifest.get("config") or {}).get("train") or {}
    return untrained_positions(stats.get("max_seq_length"), config.get("max_position_embeddings"),
                               bool(isinstance(train, dict) and train.get("init_from")))


def card(src: Path, cls_name: str, objective: str, art: Artifact, datasets: list[str] | None,
         base_model: str | None, *notes: str) -> str:
    """The pretraining card's body under fresh Hub metadata, with the artifact it was exported from (and
    ``notes``, paragraphs after that line, each where the body does not hold it)."""
    text = src.read_text(encoding="utf-8") if src.is_file() else ""
    if text.startswith("---\n"):  # the old front matter, replaced
        text = text.split("\n---\n", 1)[1] if "\n---\n" in text else ""
    origin = (f"\nExported by `kolectra export` from the checkpoint artifact `{art.kind}/{art.path.name}` "
              f"(digest `{art.manifest.get('digest', '')[:16]}`).\n")
    return (front_matter(cls_name, objective, datasets, base_model) + no_local_paths(text.rstrip("\n")) + "\n"
            + origin + "".join(f"\n{note}\n" for note in notes if note and note not in text))


# an absolute or home-relative local path: starts a word with '/' or '~/' (a URL's or a Hub id's '/'
# follows a letter), runs to whitespace, '|' or a quote
_LOCAL_PATH = re.compile(r"(?<![\w:/.~-])(?:~|[A-Za-z]:)?/(?:[^\s|`'\"/]+/)*([^\s|`'\"/]*)")


def no_local_paths(text: str) -> str:
    """``text`` with every local absolute path cut to its last part (``/home/me/runs/base`` ->
    ``[local folder]/base``): where a file sat on the author's machine is no fact for a Hub reader.
    Not ``<local folder>``: a Markdown renderer takes that for an HTML tag and shows ``/base``."""
    return _LOCAL_PATH.sub(lambda m: f"[local folder]/{m.group(1)}", text)


def warnings(art: Artifact, private: bool) -> list[str]:
    """What ``--dry-run`` warns of before the real push: no token to push with, and a public push of a
    model whose pretraining verdict says it learned nothing."""
    from huggingface_hub import get_token

    out = []
    if not get_token():
        out.append(f"no Hugging Face token found (HF_TOKEN or `{LOGIN}`): the real push would fail")
    health = (art.manifest.get("stats") or {}).get("health") or {}
    if health.get("status") == "not_learning" and not private:
        why = "; ".join(health.get("problems", []))[:300]
        out.append("this checkpoint's pretraining health says it learned nothing" + (f" ({why})" if why else "")
                   + ": a public push shares a model that is no better than chance (--private keeps it to you)")
    return out


def operations(folder: Path) -> list:
    """The commit a push makes: one ``CommitOperationAdd`` per file of ``folder``, paths relative to it."""
    from huggingface_hub import CommitOperationAdd

    return [CommitOperationAdd(path_in_repo=p.relative_to(folder).as_posix(), path_or_fileobj=str(p))
            for p in sorted(folder.rglob("*")) if p.is_file()]


def push(folder: Path, repo_id: str, dry_run: bool, private: bool = False) -> list[str]:
    """Upload ``folder`` as one commit to ``repo_id`` (created if absent); with ``dry_run``, only the
    lines saying what that commit would hold. Returns the lines printed."""
    hub_id(repo_id, "--push")
    ops = operations(folder)
    total = sum(Path(op.path_or_fileobj).stat().st_size for op in ops)
    lines = [f"{'would upload' if dry_run else 'uploading'} {len(ops)} files ({total:,} bytes) to "
             f"https://huggingface.co/{repo_id} in one commit:"]
    lines += [f"  {op.path_in_repo}  {Path(op.path_or_fileobj).stat().st_size:,} bytes" for op in ops]
    if dry_run:
        return lines
    import httpx2  # huggingface_hub's HTTP client (pinned with it)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    api = HfApi()  # kolectra's CLI leaves HF_HUB_OFFLINE unset for a real push, and only for it
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        info = api.create_commit(repo_id, operations=ops, commit_message="kolectra export")
    except OfflineModeIsEnabled:
        raise ConfigError("--push: HF_HUB_OFFLINE is set in the environment; unset it to upload (or use "
                          "--dry-run to see what would be uploaded)") from None
    except LocalTokenNotFoundError:
        raise EnvironmentProblem(f"--push: no Hugging Face token: run `{LOGIN}` or set HF_TOKEN") from None
    except httpx2.TransportError as e:  # refused, unreachable, DNS, timed out: the network, not the request
        raise EnvironmentProblem(f"--push: cannot reach the Hub at {api.endpoint} ({type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:200] if str(e) else 'no detail'}); check the network "
                                 "and HF_ENDPOINT, then run the export again") from None
    except HfHubHTTPError as e:
        status = getattr(e.response, "status_code", None)
        if status not in (401, 403):
            raise
        raise EnvironmentProblem(f"--push: the Hub refused the token (HTTP {status}) for {repo_id}: log in again "
                                 "with a token that can write there") from None
    return lines + [f"committed: {info.commit_url}"]
