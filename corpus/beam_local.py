"""Three changes to Beam's local runner (the in-process FnApiRunner) that let go of a stage's input
sooner, lowering the peak memory of a local corpus or examples job (docs/scale.md, "What the local
runner holds at its peak"). Beam 2.77, and what each replacement does instead:

- ``GroupingBuffer.partition`` (a shuffle's output) encodes every group into one stream, copies it
  into one bytes object and only then clears its table of decoded values; here each group is
  encoded into streams of about :data:`PARTITION_STREAM_BYTES` and dropped from the table once
  encoded.
- ``BundleManager._send_input_to_worker`` writes a bundle's whole input into one stream and hands
  it to the data channel as one message (copied twice on the way); here the stream is flushed as a
  message whenever it holds :data:`SEND_MESSAGE_BYTES` (always between elements: each buffer the
  runner sends ends on one). To a worker process it sends from a thread of its own: the runner
  sends a bundle's input before it asks the worker to start the bundle, and Beam's gRPC channel
  holds only so much unread (100 MB in each of the runner's two send queues, Beam 2.77; the
  worker's queue, 5 messages or 100 MB), so a worker's input over about 0.3-0.5 GB in these
  messages would block the runner before the bundle ever started, a hang for ever; a single
  message, as Beam sends it, passes by the queues' one-oversized-item rule. Each write takes the
  stream's flush lock, as its timed flush does.
- ``InMemoryDataChannel.input_elements`` (in-process worker and runner) keeps every message until
  the last is read; here each is let go once read.

A job stopped while such a send waits on a full channel (a worker process died, or Ctrl-C) would then
hang: Beam's teardown closes each channel by queueing one more message behind the send's, which
nobody reads any more. :func:`give_up_sends` (called by the runner's :class:`~kolectra.corpus.
interruption.Interruption` once the job is stopped) ends those sends and discards what waits in their
channels.

The elements, their order and so every byte a job writes are the same (tests/test_beam_local.py).
:func:`install` is called by ``corpus/runners.LocalRunner`` before each local job; it patches once
per process, and only when Beam is the version these were written against (:data:`BEAM_VERSION`,
pinned in pyproject.toml), each replaced method's source is the one read (:data:`FINGERPRINTS`)
and so is each method of Beam's the replacements rely on (:data:`RELIED_ON`): otherwise Beam's own
methods stay, with one debug line. Other runners never call these methods (they are the
FnApiRunner's own and its in-process channel's), so a patch left in place is harmless.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import queue
import threading
import weakref

_log = logging.getLogger(__name__)

BEAM_VERSION = "2.77.0"
# sha256 of inspect.getsource of each replaced method, as in Beam 2.77.0
FINGERPRINTS = {
    "GroupingBuffer.partition": "140537a87a1f2648b0aae8a492b5b12c8ab789c9b3d23cf00d834e593948e72b",
    "BundleManager._send_input_to_worker": "ac21c0a68b72104a75d79105cf93b5e67e99564f95edcd73ae49b1b7d57e70ab",
    "InMemoryDataChannel.input_elements": "615114c4d9eaaea977e6ad3f8e05246372c227c6460bd15d5e6dc725181e21fe",
}
# sha256 of the Beam 2.77.0 methods whose behaviour the threaded send relies on, not replaced: the
# runner's output stream flushes on a timer under `_flush_lock` (made in `__init__`), handing its
# bytes to the channel and only then clearing them (_send_input_to_worker); a channel's close queues
# its end mark behind the queued messages, and one forwarding thread moves them from that queue to
# the one gRPC reads, marking it closed once the mark is through (give_up_sends)
RELIED_ON = {
    "_GrpcDataChannel.close": "830f00687460621fa95e1a2d3bb6ed9beabadf2baea1a13158111b922b81d158",
    "_GrpcDataChannel._forward_pending_to_send": "4892ac900a21c000fd1ead60dbe0771eba756a7a9e5e372952ecfe782df2dbaf",
    "SizeBasedBufferingClosableOutputStream.flush": "12bff9f0f2557fc8251ec75303c6235857916750a917649467e29cb27f781c4c",
    "TimeBasedBufferingClosableOutputStream.__init__": "9e40ab041d65de7e8673184b89287879acbf57348fd11a0ead7aca657afdcdbd",
    "TimeBasedBufferingClosableOutputStream.flush": "1b8351f3ec918ad54aa32190956a49754e1a546d640b1468f49b37a0b6dfbc93",
}
# A shuffle's output streams and the messages a bundle's input is sent in: small enough that their
# copies are a small part of a stage's input, large enough that their count costs nothing
PARTITION_STREAM_BYTES = 1 << 20
SEND_MESSAGE_BYTES = 10 << 20
# The name of each thread that sends a bundle's input to a worker process (and the bundle id): one
# that dies of an error fails the job (corpus/worker_watch.py), or its worker would wait for ever
SEND_THREAD = "kolectra-send-"

_originals: dict = {}  # qualified name -> Beam's method, while patched
# the runner's data channels to worker processes that a send thread wrote to, and those given up
_sent_to: weakref.WeakSet = weakref.WeakSet()
_given_up: weakref.WeakSet = weakref.WeakSet()
_sends_lock = threading.Lock()


def _targets() -> dict:
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner  # noqa: PLC0415 - Beam loads late
    from apache_beam.runners.worker import data_plane  # noqa: PLC0415

    return {"GroupingBuffer.partition": (execution.GroupingBuffer, "partition", _partition),
            "BundleManager._send_input_to_worker": (fn_runner.BundleManager, "_send_input_to_worker", _send_input_to_worker),
            "InMemoryDataChannel.input_elements": (data_plane.InMemoryDataChannel, "input_elements", _input_elements)}


def _relied_on() -> dict:
    from apache_beam.runners.worker import data_plane  # noqa: PLC0415 - Beam loads late

    return {name: getattr(getattr(data_plane, owner), attr)
            for name, (owner, attr) in ((name, name.split(".")) for name in RELIED_ON)}


def fingerprint(method) -> str:
    """sha256 of a method's source as installed (empty when its source cannot be read)."""
    try:
        return hashlib.sha256(inspect.getsource(method).encode("utf-8")).hexdigest()
    except (OSError, TypeError):
        return ""


def installed() -> bool:
    return bool(_originals)


def install() -> bool:
    """Patch Beam's local runner (once per process); whether it is patched. Nothing is changed
    unless Beam's version and every fingerprint match."""
    if _originals:
        return True
    import apache_beam  # noqa: PLC0415

    if apache_beam.__version__ != BEAM_VERSION:
        _log.debug("Beam %s, not %s: its local runner is left as it is", apache_beam.__version__, BEAM_VERSION)
        return False
    targets = _targets()
    changed = [name for name, (owner, attr, _) in targets.items() if fingerprint(getattr(owner, attr)) != FINGERPRINTS[name]]
    changed += [name for name, method in _relied_on().items() if fingerprint(method) != RELIED_ON[name]]
    if changed:
        _log.debug("Beam's %s changed: its local runner is left as it is", ", ".join(changed))
        return False
    for name, (owner, attr, replacement) in targets.items():
        _originals[name] = getattr(owner, attr)
        setattr(owner, attr, replacement)
    return True


def uninstall() -> None:
    """Put Beam's own methods back (tests)."""
    targets = _targets()
    for name, original in list(_originals.items()):
        owner, attr, _ = targets[name]
        setattr(owner, attr, original)
        del _originals[name]


def _partition(self, n: int) -> list[list[bytes]]:
    if self._grouped_output or not self._windowing.is_default():  # computed already, or windows: Beam's
        return _originals["GroupingBuffer.partition"](self, n)
    from apache_beam.coders.coder_impl import create_OutputStream  # noqa: PLC0415
    from apache_beam.runners.portability.fn_api_runner import execution  # noqa: PLC0415

    globally_window = execution.GlobalWindows.windowed_value(
        None, timestamp=execution.GlobalWindow().max_timestamp(),
        pane_info=execution.windowed_value.PaneInfo(
            is_first=True, is_last=True, timing=execution.windowed_value.PaneInfoTiming.ON_TIME,
            index=0, nonspeculative_index=0)).with_value
    coder_impl = self._post_grouped_coder.get_impl()
    key_coder_impl = self._key_coder.get_impl()
    grouped: list[list[bytes]] = [[] for _ in range(n)]
    streams = [create_OutputStream() for _ in range(n)]
    for idx, encoded_key in enumerate(list(self._table)):  # Beam's order: the table's
        values = self._table.pop(encoded_key)  # the decoded values go as soon as they are encoded
        stream = streams[idx % n]
        coder_impl.encode_to_stream(globally_window((key_coder_impl.decode(encoded_key), values)), stream, True)
        del values
        if stream.size() >= PARTITION_STREAM_BYTES:
            grouped[idx % n].append(stream.get())
            streams[idx % n] = create_OutputStream()
    for ix, stream in enumerate(streams):
        if stream.size() or not grouped[ix]:  # Beam gives an empty part one empty stream
            grouped[ix].append(stream.get())
    self._grouped_output = grouped
    return grouped


def _send_input_to_worker(self, process_bundle_id: str, read_transform_id: str, byte_streams) -> None:
    from apache_beam.runners.worker import data_plane  # noqa: PLC0415

    assert self._worker_handler is not None
    channel = self._worker_handler.data_conn
    data_out = channel.output_stream(process_bundle_id, read_transform_id)
    # The runner's streams also flush on a timer, from a thread of their own (Beam's
    # DATA_BUFFER_TIME_LIMIT_MS): that flush takes the stream's bytes under its lock, waits for room
    # in the channel, then clears the stream, so bytes written meanwhile would be cleared unsent
    # (whole shuffle groups lost once a worker's channel was full: tests/test_local_worker_channel.py).
    # Each write takes the same lock; this thread's own flush takes it itself.
    written = getattr(data_out, "_flush_lock", None) or contextlib.nullcontext()

    def send() -> None:
        for byte_stream in byte_streams or []:
            if channel in _given_up:  # the job was stopped: the rest would go nowhere
                return
            with written:
                data_out.write(byte_stream)
            if data_out.size() >= SEND_MESSAGE_BYTES:  # each byte stream ends on an element
                data_out.flush()
        data_out.close()

    if not isinstance(channel, data_plane._GrpcDataChannel):  # noqa: SLF001 - the in-process worker:
        send()  # it runs the bundle in this thread once asked, reading what is in its list by then
        return
    # a worker process: the bundle starts while its input is sent, and the worker's reading lets the
    # channel's bounded queues drain; once the worker has the last message the thread is done (a
    # worker that dies leaves it waiting, with the job failed by then, until give_up_sends)
    with _sends_lock:
        _sent_to.add(channel)
    threading.Thread(target=send, name=f"{SEND_THREAD}{process_bundle_id}", daemon=True).start()


def give_up_sends() -> None:
    """The job was stopped (a worker process died, or Ctrl-C; called again until Beam's teardown
    ends): the sends to worker processes stop, and what waits in their channels is read and dropped.
    Otherwise a send to a worker that no longer reads keeps the channel's queues full, and Beam's
    teardown, which closes each channel by queueing one more message behind it, waits for ever (a
    worker killed during a shuffle's send over the channel's 200 MB: tests/test_local_worker_channel.py).
    Each channel gets a thread of its own that reads it until Beam has closed it."""
    with _sends_lock:
        new = [channel for channel in _sent_to if channel not in _given_up and _forwarding(channel)]
        for channel in new:
            _given_up.add(channel)
    for channel in new:
        threading.Thread(target=_discard, args=(channel,), name="kolectra-discard", daemon=True).start()


def _forwarding(channel) -> bool:
    """Whether the channel's forwarding thread still runs: it ends once the channel's close is through."""
    forwarder = channel._send_forwarder  # noqa: SLF001 - Beam 2.77's channel (fingerprinted)
    return forwarder is not None and forwarder.is_alive()


def _discard(channel) -> None:
    """Read the runner's messages to a stopped worker and drop them, in the stopped worker's place,
    until the channel's close is through; the end-of-stream mark that closing queues is put back for
    gRPC's writer (this reader takes from the same queue; the forwarder that queued it has returned)."""
    to_send, finished = channel._to_send, channel._WRITES_FINISHED  # noqa: SLF001 - Beam 2.77's channel (fingerprinted)
    while _forwarding(channel):
        try:
            message = to_send.get(timeout=0.1)
        except queue.Empty:
            continue
        if message is finished:
            with contextlib.suppress(queue.Full):
                to_send.put(message, 0, block=False)
            return


def _input_elements(self, instruction_id, unused_expected_inputs, abort_callback=None):
    from apache_beam.portability.api import beam_fn_api_pb2  # noqa: PLC0415

    pending, other_inputs, i = self._inputs, [], 0
    while i < len(pending):  # by index, as Beam's loop: a message added meanwhile is read too
        element, pending[i] = pending[i], None  # let go once read
        i += 1
        if element is None:  # read by a reader that stopped early
            continue
        if element.instruction_id == instruction_id:
            if isinstance(element, beam_fn_api_pb2.Elements.Timers):
                if not element.is_last:
                    yield element
            if isinstance(element, beam_fn_api_pb2.Elements.Data):
                if element.data or element.is_last:
                    yield element
        else:
            other_inputs.append(element)
        del element
    self._inputs = other_inputs
